"""PS jobs: the PS round, a short real parameter-server job on the plan's own servers and
trainers: it ran; no server holds every trainer; no trainer lags its peers."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping

from preflight.checks.common import explained_by_cpu
from preflight.checks.cpu_cores import short_of_cpu
from preflight.common.paddlelog import GLOO_PEER
from preflight.common.ps_failure import ran_out_of_time
from preflight.common.units import hosts_text
from preflight.model.cluster import Cluster
from preflight.model.findings import EXPLAINED_BY, Finding, Status
from preflight.model.measure import PsRound, PsServer, PsTrainer

NAME = "ps-round"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
PS jobs (`mode: ps`) only, in place of the all-reduce (a PS job runs no collective). The plan's
own launcher commands run a short real PS job (in the job's container where it runs in one): a
synthetic model, a sparse embedding sharded over the servers and a small dense part (sized
by the policy's `ps_model`), trained for 5 s by every trainer in the policy's `ps_mode`
(`async`, the default, or `geo`; sync PS crashes in Paddle's CPU builds). Each trainer's
steps per second and the share of its steps spent off the CPU (waiting on its pulls and
pushes, or for a core), and each server's CPU time, its cgroup's throttling and the host's
bytes in and out while it served, are measured.
A host where the job fails fails, with its role and its log's words. A server whose cgroup
throttled it for more than 10 % of the round, or on a host short of CPU (cpu-cores), holds
every trainer: it fails, named with its role and that evidence. A trainer below half the
median trainer's steps per second is slow on its own: in async and GEO modes trainers do not
wait for one another, so it only slows itself (warn), said with its cause where its CPU is
short. Where the job fails, the host that failed on its own is named (or the peer the
others' gloo timed out on), not the hosts that only waited for it; a round that hung on every
host with no host saying why is run once more before it is judged. Paddle builds without
the PS core (3.1+ CPU wheels) cannot run the round: `could-not-check`, with the version.
"""
WHY = ("Trainers push gradients to the servers and wait for parameters back: an overloaded, "
       "throttled or badly placed server holds every trainer, and a job whose PS path cannot "
       "run at all (no PS core, a blocked port, a broken protobuf) fails only once submitted.")
FIX = ("Give the named server host CPU (its cgroup quota, other work), move it with the "
       "inventory's roles, or fix what its log names")
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "a PS job (--mode ps) is checked with the network tests (not --no-allreduce)"
THROTTLED_SHARE = 0.1  # of the round's time a server's cgroup held it back
SLOW_TRAINER = 0.5  # of the median trainer's steps per second


def check(cluster: Cluster) -> Iterator[Finding]:
    net = cluster.network
    if net is None:
        return
    if net.ps_skipped:
        yield Finding(NAME, Status.COULD_NOT_CHECK, net.hosts,
                      f"PS round not run: {net.ps_skipped}", {"reason": net.ps_skipped})
        return
    ps = net.ps
    if ps is None:
        return
    if ps.failed:
        causes = _causes(ps)
        again = " (run twice, it hung both times)" if ps.attempts > 1 else ""
        for host, why in causes.items():
            others = sorted(h for h in ps.failed if h not in causes)
            waited = f"; {hosts_text(others)} then waited on it and stopped" if others else ""
            waited += again
            yield Finding(NAME, Status.FAIL, (host,),
                          f"{_who(ps, host)}: the PS job failed there: {why}{waited}",
                          {"reason": why})
        return
    if not ps.trainers:
        yield Finding(NAME, Status.FAIL, ps.hosts, "the PS round ended with no trainer's "
                      "figures", {})
        return
    short = short_of_cpu(cluster)
    rates = {t.index: t.steps_per_s for t in ps.trainers}
    median = statistics.median(rates.values())
    named: set[str] = set()
    for s in ps.servers:
        f = _server(ps, s, median, short)
        if f is not None and s.host not in named:
            named.add(s.host)
            yield f
    for t in ps.trainers:
        if t.host in named or median <= 0 or t.steps_per_s >= SLOW_TRAINER * median:
            continue
        named.add(t.host)
        yield _trainer(ps, t, median, short)
    rest = [h for h in ps.hosts if h not in named]
    if rest:
        step = statistics.median(t.median_s for t in ps.trainers if t.median_s) \
            if any(t.median_s for t in ps.trainers) else None
        cores = max((s.cores for s in ps.servers), default=None)
        wait = _wait_share(ps)
        yield Finding(NAME, Status.PASS, tuple(rest), (
            f"PS round ({ps.mode}, {ps.seconds:g} s): {len(ps.trainers)} trainer(s) at "
            f"{median:.3g} steps/s median" + (f" ({step * 1e3:.3g} ms a step)" if step else "")
            + (f", {wait:.0%} of it off the CPU (waiting on pulls and pushes, or for a core)"
               if wait is not None else "")
            + (f", {len(ps.servers)} server(s) busy up to {cores:.2g} cores" if cores is not None
               else "")),
            {"steps_per_s": median, "step_s": step, "wait_share": wait})


def _wait_share(ps: PsRound) -> float | None:
    """The median trainer's share of its step time spent off the CPU."""
    shares = [s for t in ps.trainers if (s := t.wait_share) is not None]
    return statistics.median(shares) if shares else None


def _waited(why: str) -> bool:
    return GLOO_PEER.search(why) is not None or ran_out_of_time(why)


def _causes(ps: PsRound) -> dict[str, str]:
    """The failed hosts a job failed because of (host -> why): those that failed on their
    own; where every one only waited, the peers gloo says they waited on; where nothing
    says, every failed host."""
    own = {h: why for h, why in ps.failed.items() if not _waited(why)}
    if own:
        return own
    by_address = {a: h for h, a in ps.addresses.items()}
    waited_on: dict[str, str] = {}
    for host, why in ps.failed.items():
        m = GLOO_PEER.search(why)
        peer = by_address.get(m.group(1)) if m else None
        if peer is not None and peer != host:
            waited_on.setdefault(peer, ps.failed.get(peer) or f"{host} timed out waiting on "
                                 f"it: {why}")
    return waited_on or dict(ps.failed)


def _who(ps: PsRound, host: str) -> str:
    role = ps.roles.get(host)
    return f"{host} (PS {role})" if role else host


def _server(ps: PsRound, s: PsServer, median: float, short: Mapping[str, str]) -> Finding | None:
    """A server that holds every trainer: its cgroup throttled it, or its host is short of
    CPU; None for a server that kept up."""
    evidence = []
    if s.throttled and s.throttled_s and s.wall_s and s.throttled_s > THROTTLED_SHARE * s.wall_s:
        evidence.append(f"its cgroup throttled it {s.throttled} times, {s.throttled_s:.2g} s "
                        f"of the {s.wall_s:.2g} s it served")
    if s.host in short:
        evidence.append(f"its host is short of CPU ({short[s.host]})")
    if not evidence:
        return None
    wait = _wait_share(ps)
    waited = f", {wait:.0%} of their steps off the CPU" if wait is not None else ""
    return Finding(NAME, Status.FAIL, (s.host,),
                   f"{_who(ps, s.host)}: holds every trainer: " + "; ".join(evidence)
                   + f"; it used {s.cores:.2g} cores while trainers ran at {median:.3g} "
                   f"steps/s median{waited} ({ps.mode})",
                   {"cores": s.cores, "throttled": s.throttled, "throttled_s": s.throttled_s,
                    "steps_per_s": median})


def _trainer(ps: PsRound, t: PsTrainer, median: float, short: Mapping[str, str]) -> Finding:
    cause = f": explained by its CPU ({short[t.host]})" if t.host in short else ""
    peers = hosts_text(sorted({x.host for x in ps.trainers if x.host != t.host}))
    data: dict[str, object] = {"steps_per_s": t.steps_per_s, "median_steps_per_s": median}
    if t.host in short:
        data[EXPLAINED_BY] = explained_by_cpu(
            t.host, f"its trainer {t.index} of the PS round steps at {t.steps_per_s:.3g}/s vs "
                    f"{median:.3g} median")
    return Finding(NAME, Status.WARN, (t.host,),
                   f"{_who(ps, t.host)}: trainer {t.index} is slow on its own: "
                   f"{t.steps_per_s:.3g} steps/s vs {median:.3g} median ({peers}){cause}; in "
                   f"{ps.mode} mode it slows only itself, not the servers or other trainers",
                   data)
