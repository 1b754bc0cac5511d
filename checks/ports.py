"""The ports the Paddle launcher will use are free on every host, and, with the network
tests, the plan's ports on each host answer from the plan's other hosts.

Ports the policy names must be free (fail). Without them, the plan picks free ports itself,
so Paddle's default ports being taken only warns: a launch by hand with the defaults would
clash, the plan's would not."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence

from preflight.checks.common import could_not_check, passed, sections
from preflight.checks.neighbours import too_small
from preflight.common.units import hosts_text, port_ranges
from preflight.model.cluster import Cluster
from preflight.model.facts import PortsFacts
from preflight.model.findings import EXPLAINED_BY, Explanation, Finding, Status
from preflight.model.measure import PortReach
from preflight.model.policy import DEFAULT_PORTS

NAME = "ports"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Ports named by `--ports` or the policy are not listening on any host (fail); without them,
Paddle's defaults (6070-6077, 6767) listening warns: a hand-made launch would clash, the plan's
ports are free. With the network tests, a listener on every host of the plan binds the ports the
plan gives it and each host of the plan connects to the ports the job will have it use (a
collective job: every other host's; a PS job: its servers' and the rendezvous), at most 32 at
once, 3 s each; a connection that timed out is tried again, alone with the others that did, for
10 s, before it counts. Ports that still do not answer fail on their host, named with its part
in the job and what the others got (a timeout twice is a firewall dropping them; a refusal, one
rejecting them); a host that reaches none of the ports it tried fails as the one whose way out
is blocked. Timeouts between hosts whose neighbour table cannot hold the job's mesh are that
table's (the `neighbours` finding), not a firewall's.
"""
WHY = ("The launcher binds its ports as it starts: one still held by an earlier job keeps that "
       "host's ranks from starting, and the others wait at the rendezvous. A port a firewall "
       "drops passes every local check and hangs the job at its first connection.")
FIX = ("Stop the previous job, or launch with the plan; open the plan's ports between the "
       "job's hosts")
LIMITS: tuple[str, ...] = ()


def check(cluster: Cluster) -> Iterator[Finding]:
    explicit = cluster.policy.ports is not None
    wanted = cluster.policy.ports if cluster.policy.ports is not None else DEFAULT_PORTS
    if not wanted:
        return
    listening, missing = sections(cluster, lambda f: f.ports, PortsFacts)
    yield from could_not_check(NAME, "listening ports", missing)
    ok = []
    for host, p in listening.items():
        taken = sorted(set(wanted) & set(p.tcp))
        if taken and explicit:
            yield Finding(NAME, Status.FAIL, (host,),
                          f"{host}: port {port_ranges(tuple(taken))} already in use (the launcher "
                          f"needs {port_ranges(wanted)}): stop the old job or choose other ports",
                          {"taken": taken})
        elif taken:
            yield Finding(NAME, Status.WARN, (host,),
                          f"{host}: port {port_ranges(tuple(taken))} already in use: a launch with "
                          f"Paddle's default ports ({port_ranges(wanted)}) would clash; the plan's "
                          "ports are free", {"taken": taken})
        else:
            ok.append(host)
    blamed = yield from reach_findings(cluster)
    ok = [h for h in ok if h not in blamed]
    if ok:
        # Only the plan's hosts had their ports tried: say it of those alone.
        reach = cluster.network.reach if cluster.network else ()
        # (A PS trainer's own ports are bound, not connected to: nobody tried them.)
        older = not any(r.reached_from for r in reach)  # a report from before the pairs
        tried = {r.host for r in reach if not r.error and (r.reached_from or older)}
        across = [h for h in ok if h in tried]
        yield passed(NAME, ok, f"ports {port_ranges(wanted)} free on {len(ok)} hosts" + (
            f"; the plan's ports answer from host to host on {hosts_text(across)}"
            if across else ""))


def reach_findings(cluster: Cluster) -> Generator[Finding, None, set[str]]:
    """The plan's ports a host's peers could not reach, on the host to blame: the one whose
    ports nobody reaches, or the one that reaches nobody; returns the hosts named."""
    reach = cluster.network.reach if cluster.network else ()
    named: set[str] = set()
    for r in reach:
        if r.error:
            named.add(r.host)
            yield Finding(NAME, Status.COULD_NOT_CHECK, (r.host,),
                          f"{r.host}: its plan ports' reach not tested: {r.error}",
                          {"reason": r.error})
    tested = [r for r in reach if not r.error]
    sources = {r.host for r in tested}
    # source -> the hosts whose ports it tried (the job's pairs: a PS trainer tries its
    # servers', not the other trainers'); older reports: every other host's
    older = not any(r.reached_from for r in tested)
    tried: dict[str, set[str]] = {}
    for r in tested:
        for src in (sources - {r.host}) if older else r.reached_from:
            tried.setdefault(src, set()).add(r.host)
    # source -> the hosts whose ports it could not reach
    misses: dict[str, set[str]] = {}
    for r in tested:
        for src in r.unreached:
            misses.setdefault(src, set()).add(r.host)
    cut_off = {s for s, targets in misses.items()
               if len(targets) > 1 and targets >= tried.get(s, sources - {s})}
    full = too_small(cluster)  # hosts whose neighbour table cannot hold the job's mesh
    for src in sorted(cut_off):
        named.add(src)
        yield Finding(NAME, Status.FAIL, (src,),
                      f"{src}{_role(tested, src)}: reaches none of the plan's other hosts on "
                      f"their job ports ({_why(tested, src)}): a firewall there blocks its way "
                      "out; open the plan's ports between the job's hosts",
                      _explained({"unreached": sorted(misses[src])}, [src], full))
    for r in tested:
        froms = sorted(s for s in r.unreached if s not in cut_off)
        if not froms:
            continue
        named.add(r.host)
        said = sorted({r.unreached[s] for s in froms})
        yield Finding(NAME, Status.FAIL, (r.host,),
                      f"{r.host}{_role(tested, r.host)}: its job ports {port_ranges(r.ports)} do "
                      f"not answer from {hosts_text(froms)} ({'; '.join(said)}): "
                      f"{_cause(said)}; open them to the job's hosts",
                      _explained({"ports": list(r.ports), "unreached_from": froms},
                                 [r.host, *froms], full))
    return named


def _explained(data: dict[str, object], ends: Sequence[str], full: set[str],
               ) -> dict[str, object]:
    """A port timeout between hosts of which one's neighbour table cannot hold the job's mesh
    is that table's symptom (folded into its finding), not a firewall."""
    host = next((h for h in ends if h in full), None)
    if host is None:
        return data
    return {**data, EXPLAINED_BY: Explanation(
        "neighbours", host,
        f"the job's ports did not answer between {hosts_text(list(ends))}").as_data()}


def _role(reach: Sequence[PortReach], host: str) -> str:
    role = next((r.role for r in reach if r.host == host), "")
    return f" ({role})" if role else ""


def _why(reach: Sequence[PortReach], src: str) -> str:
    return "; ".join(sorted({r.unreached[src] for r in reach if src in r.unreached}))


def _cause(said: Sequence[str]) -> str:
    text = " ".join(said)
    if "timed out" in text:
        return "a firewall drops them (the connection timed out)"
    if "refused" in text.lower():
        return "they are rejected (connection refused: a firewall's reject, or nothing " \
            "listens where the job will)"
    return "they cannot be reached"
