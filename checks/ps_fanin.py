"""PS jobs: each parameter server's host receiving from all its trainers at once, against what
a healthy host's link carries."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from preflight.checks import bandwidth
from preflight.checks.common import explained_by_cpu, passed, tier
from preflight.checks.cpu_cores import short_of_cpu
from preflight.common import localise
from preflight.common.units import rate
from preflight.model.cluster import Cluster
from preflight.model.findings import EXPLAINED_BY, Finding, Status
from preflight.model.measure import FanIn

NAME = "ps-fanin"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
PS jobs (`mode: ps`) only. Every trainer pushes gradients to every server, all at once: each
server host of the plan receives from all its trainers' hosts together (one iperf3 client on
each, to a server port of its own), and what arrives in all is judged against what a healthy
host's link carries (the median host's best link of the iperf3 survey, or the NICs' line
rate): below 75 % (warn) / 50 % (fail) of it, the server's link cannot take its trainers'
pushes. A fan-in below 75 % is measured twice more, and its best kept, before it is judged.
Where its CPU is short (cpu-cores) or its link already slow (bandwidth), the finding says
that cause. A trainer on the server's own host crosses no link and is left out; a run that
failed is `could-not-check`.
"""
WHY = ("Trainers push to a server together and wait for its parameters back: a server host "
       "whose link cannot take them all at once holds every trainer, though each pair alone "
       "looked fine.")
FIX = ("Move the server to a host with a free link (roles in the inventory), give servers "
       "their own hosts, or check the named host's uplink and receive queues")
LIMITS: tuple[str, ...] = ("link_warn_ratio", "link_fail_ratio")
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "a PS job (--mode ps) is checked with the network tests"


def check(cluster: Cluster) -> Iterator[Finding]:
    net = cluster.network
    if net is None or not net.fanin:
        return
    survey = localise.measured(net.links)
    ref = localise.reference_bps(survey, net.line_bps()) if survey else None
    limits = cluster.policy.limits
    short = short_of_cpu(cluster)
    slow_link = {h: f.message for f in bandwidth.check(cluster)
                 if f.status in (Status.WARN, Status.FAIL) for h in f.hosts}
    ok: list[str] = []
    for fan in net.fanin:
        host, total = fan.receiver, fan.total_bps
        if fan.errors:
            sender, why = next(iter(fan.errors.items()))
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                          f"{host} (PS server): could not measure its fan-in: {sender}: {why}",
                          {"errors": fan.errors})
            continue
        if total is None or ref is None:
            ok.append(host)
            continue
        status, _ = tier(total, limits.link_warn_ratio * ref, limits.link_fail_ratio * ref,
                         high_is_bad=False)
        if status is None:
            ok.append(host)
            continue
        data: dict[str, object] = {"total_bps": total, "reference_bps": ref,
                                   "senders": {s: r.received_bps for s, r in fan.runs.items()}}
        if host in short:
            data[EXPLAINED_BY] = explained_by_cpu(
                host, f"as a PS server its {len(fan.runs)} trainer host(s) at once deliver "
                      f"{rate(total)} in all vs {rate(ref)} a healthy link carries")
        yield Finding(NAME, status, (host,), _message(fan, total, ref, short, slow_link), data)
    if ok:
        figures = [f.total_bps for f in net.fanin if f.receiver in ok and f.total_bps]
        yield passed(NAME, ok, f"fan-in to {len(ok)} PS server host(s) from all their "
                     "trainers at once" + (f": {rate(min(figures))} or more in all"
                                           if figures else ""))


def _message(fan: FanIn, total: float, ref: float, short: Mapping[str, str],
             slow_link: Mapping[str, str]) -> str:
    host, n = fan.receiver, len(fan.runs)
    each = ", ".join(f"{s} {rate(r.received_bps or 0.0)}" for s, r in fan.runs.items())
    again = f", the best of {fan.attempts} runs" if fan.attempts > 1 else ""
    text = (f"{host} (PS server): its {n} trainer host(s) at once deliver {rate(total)} in "
            f"all ({each}{again}) vs {rate(ref)} a healthy host's link carries")
    if host in short:
        return text + f": explained by its CPU ({short[host]}); fix its CPU first (cpu-cores)"
    if host in slow_link:
        return text + ": its slow link (bandwidth) holds every trainer"
    return text + (": its link cannot take its trainers' pushes at once (a shared uplink, an "
                   "oversubscribed switch port, the receive path)")
