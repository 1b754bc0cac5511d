"""iperf3 between hosts: slow hosts and slow paths, judged against the cluster itself.

A suspect (below link_warn_ratio of the median host's best link, or below the policy's
absolute floor) is blamed only as its retest alone against a healthy host confirms it; a
link at its NICs' negotiated line rate is never slow. The NIC error counters read around
the tests tell a bad cable or NIC (CRC, frame errors) and a host that cannot keep up (missed,
FIFO) from congestion, which counts nothing there."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from preflight.checks.common import explained_by_cpu as explained
from preflight.checks.cpu_cores import short_of_cpu
from preflight.checks.retests import (
    Healthy,
    against_clean,
    best_retest,
    best_retests,
    clean_retest,
    cleared_why,
    confirmed,
    healthy_links,
    in_direction,
    tiered,
)
from preflight.common import localise
from preflight.common.units import hosts_text, rate
from preflight.model.cluster import Cluster
from preflight.model.findings import EXPLAINED_BY, Finding, Status
from preflight.model.measure import NIC_OVERRUN, NIC_PHYSICAL, LinkRun, NetworkTests
from preflight.model.policy import Limits

NAME = "bandwidth"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
iperf3 between hosts, judged against the cluster itself: each host's best link shows what its
NIC and path can do, and the median of those is the yardstick. A host whose every link in a
direction is below 75 % of it (warn) / 50 % (fail) is a **slow host**; one slow pair between
hosts that are fine elsewhere is a **slow path**. Each suspect is measured again, alone on its
hosts, twice (against one of the best healthy hosts, or the slow path itself) before it is
blamed: up to 8 suspects one at a time, more (a survey whose pairs contended for something they
share) in rounds of up to 4 pairs with no host in two, up to 32 suspects. The fastest healthy
link is measured again among them, and a suspect is blamed only if even the better of its two
runs shows a clear deficit: below 75 % of the median host *and* of the slowest healthy link of
the survey *and* of that healthy link's best run beside it, so that links as uneven as this
cluster's healthy ones (CPU-bound streams, a busy software bridge), or slowed together with
them (CPUs or a fabric that the hosts share, busy during the retests), are not called slow;
fine on the retest, it passes as transient. Where every host is suspect in some direction (a
survey slowed unevenly all over, as on hosts sharing CPUs), no host is free to retest against:
each suspect is then retested against the host best at the facing direction (receiving, for a
slow sender), one not suspect in it first, beside the fastest link that no suspicion touches
in its direction; a deficit confirmed only against a host itself suspect there is *either
end's*, or that host's alone where its own retest against a clean host confirmed it (the other
end is then "could not judge", a warning). With `link_min_gbps` every link also meets an
absolute floor. The survey's iperf3 runs leave TCP's slow start out (`-O 1`, `--iperf-warmup`),
since their loss is judged (with `--iperf-warmup 0` it is not); the retests, judged by their rate
alone, spend no second on it.
Loss warns only where it means something: over 1 % of segments retransmitted *and* either 10
times the cluster's own typical rate (`link_loss_outlier_ratio`) or on a link below 75 % of the
median host; healthy TCP overflows its bottleneck's queue to find the link's speed, so every
link of a healthy cluster retransmits some. A link carrying 90 % of what both its NICs
negotiated runs at line rate and is never slow (`nic-speed` judges the NIC). The job interface's
error counters (`/sys/class/net/IF/statistics`) are read before the survey and after the retests
(`network.nic_counters`: what grew): CRC, frame, length or carrier errors warn as a cable,
transceiver or port going bad; missed or FIFO errors as a host that cannot empty its ring; a
slow or lossy link's finding says which of its hosts counted errors, or that none did
(congestion, not a cable). `rx_dropped` is context only: kernels count unwanted frames there.
Fewer than 3 hosts: nothing to compare with (set a floor). A host without iperf3, or a run that
failed, is `could-not-check`.
"""
WHY = ("A collective moves as fast as its slowest link: one slow host or path (a bad cable, a "
       "port that fell back, a busy uplink) sets the step time of the whole job.")
FIX = ("Check the named host's NIC, cable, negotiated speed (`ethtool`), driver; for a path, the"
       " switch ports and routes between the two")
LIMITS: tuple[str, ...] = ("link_warn_ratio", "link_fail_ratio",
                           "link_min_gbps", "link_loss_warn_pct",
                           "link_loss_outlier_ratio")
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "iperf3 runs between two hosts or more (not --no-network-tests)"
# More slow pairs than this between hosts that are fine elsewhere read as one shared
# bottleneck (an oversubscribed switch or uplink), not as that many broken cables.
MAX_PATH_FINDINGS = 4


def _yardstick(ref: float | None, limits: Limits, capped: bool = False) -> str:
    """What links are judged against: the median host's best link, or, where the links run
    faster than their NICs negotiated (virtual NICs), that line rate."""
    parts = []
    if ref is not None:
        parts.append(f"the NICs' line rate {rate(ref)}" if capped else f"median host {rate(ref)}")
    if limits.link_min_gbps:
        parts.append(f"floor {limits.link_min_gbps:g} Gbit/s")
    return ", ".join(parts)


def check(cluster: Cluster) -> Iterator[Finding]:
    net = cluster.network
    if net is None:
        return
    for f in _judged(cluster, net):
        yield _with_nic_note(f, net)
    yield from _nic_faults(net)


def _judged(cluster: Cluster, net: NetworkTests) -> Iterator[Finding]:
    yield from _unmeasured(net)
    limits = cluster.policy.limits
    survey = localise.measured(net.links)
    if not survey:
        return
    line = net.line_bps()
    ref = localise.reference_bps(survey, line)
    best = localise.reference_bps(survey)  # the median host's best link, as measured
    capped = ref is not None and best is not None and ref < best
    yard = _yardstick(ref, limits, capped)
    short = short_of_cpu(cluster)
    threshold = localise.suspect_threshold(survey, limits.link_warn_ratio,
                                              limits.link_min_gbps * 1e9, line)
    named: set[str] = set()
    loc = None
    cleared: set[tuple[str, ...]] = set()  # suspect paths a retest alone found fine
    found: list[Finding] = []
    if threshold is not None:
        loc = localise.localise(survey, threshold, line)
        healthy = healthy_links(survey, net.links, loc)
        for host in loc.slow_hosts:
            found.append(_slow_host(host, loc, survey, net.links, ref, healthy, limits,
                                    yard, short.get(host)))
        paths = [_slow_path(s, r, survey, net.links, ref, healthy, limits, yard, short)
                 for s, r in loc.slow_paths]
        cleared = {f.hosts for f in paths if f.status is Status.PASS}
        paths = [f for f in paths if f.status is not Status.PASS] or paths
        if len(paths) > MAX_PATH_FINDINGS:
            paths = [_shared_bottleneck(paths, survey, len(set(net.hosts)))]
        found += paths
    named.update(h for f in found for h in f.hosts)
    found += _loss(survey, loc, limits, named, ref, cleared, short)
    yield from found
    rest = [h for h in net.hosts if h not in named and h not in net.skipped]
    if rest:
        yield _passed(net, survey, rest, named, best, ref if capped else None,
                      threshold is None)


def _passed(net: NetworkTests, survey: Sequence[LinkRun], rest: Sequence[str],
            named: set[str], best: float | None, line: float | None, alone: bool,
            ) -> Finding:
    """The hosts no finding names, with figures of one set of links side by side: the
    slowest and the fastest link with no named host at either end (a named host's links are
    its finding's, slow or cleared); where no such link was run, the median host's best. A
    line rate is said as one, not as a host's speed."""
    own = [r.bps for r in survey if r.bps is not None and r.sender not in named
           and r.receiver not in named]
    low = min(own) if own else None
    text = f"iperf3 {net.schedule}: {len(survey)} runs"
    if own:
        lo, hi = rate(min(own)), rate(max(own))
        text += f", links between these hosts {lo}" + (f" to {hi}" if hi != lo else "")
    elif best is not None:
        text += f", median host's best {rate(best)}"
    if line is not None:
        text += f"; judged against the NICs' line rate {rate(line)} (links ran faster)"
    if alone:
        text += "; fewer than 3 hosts: nothing to compare with (set limits.link_min_gbps)"
    return Finding(NAME, Status.PASS, tuple(rest), text,
                   {"reference_bps": line or best, "slowest_bps": low, "best_median_bps": best})


def _unmeasured(net: NetworkTests) -> Iterator[Finding]:
    for host, why in net.skipped.items():
        if not why.startswith("no all-reduce"):
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                          f"{host}: no iperf3 test: {why}", {"reason": why})
    for r in net.links:
        if r.result.error:
            yield Finding(NAME, Status.COULD_NOT_CHECK, (r.sender, r.receiver),
                          f"{r.sender} -> {r.receiver}: iperf3 failed: {r.result.error}",
                          {"phase": r.phase, "reason": r.result.error})


def _slow_host(host: str, loc: localise.Localisation, survey: Sequence[LinkRun],
               links: Sequence[LinkRun], ref: float | None, healthy: Healthy,
               limits: Limits, yard: str, cpu: str | None = None) -> Finding:
    """cpu: why cpu-cores finds the host short of CPU, which then explains its links."""
    directions = loc.slow_hosts[host]
    mine = [r for r in survey if host in (r.sender, r.receiver)]
    best = {localise.SEND: max((r.bps for r in mine if r.sender == host and r.bps), default=0.0),
            localise.RECEIVE: max((r.bps for r in mine if r.receiver == host and r.bps),
                                  default=0.0)}
    what = " and ".join(f"{'sends' if d == localise.SEND else 'receives'} at most "
                        f"{rate(best[d])}" for d in directions)
    peers = sorted({r.receiver if r.sender == host else r.sender for r in mine})
    # Its own retests, in the directions it is suspect in (not the healthy link measured
    # beside them): those against a host not suspect in the direction facing it, where it
    # has any, not another suspect's retest against it.
    again_runs = best_retests(links)
    retests = [r for d in directions for r in against_clean(host, d, loc, again_runs)
               or in_direction(host, d, again_runs)]
    retrans = sum(r.result.retransmits or 0 for r in mine)
    data = {"directions": list(directions), "reference_bps": ref, "peers": peers,
            "retest_bps": [r.bps for r in retests], "retransmits": retrans, "cpu": cpu,
            **healthy.data()}
    seen = f"{what} with every peer ({hosts_text(peers)}); {yard}"
    if not retests:
        status = tiered(min(best[d] for d in directions), ref, limits)
        return Finding(NAME, status, (host,), f"{host}: slow host: {seen}; not confirmed by a "
                       "retest" + _cpu_note(cpu), data)
    run = min(retests, key=lambda r: r.bps or 0.0)
    worst = run.bps or 0.0
    status = confirmed(worst, ref, healthy, limits)
    other = run.receiver if run.sender == host else run.sender
    if status is Status.PASS:  # the conclusion first: what the retest made of it
        return Finding(NAME, Status.PASS, (host,), (
            f"{host}: {cleared_why(worst, ref, healthy, limits)}: {rate(worst)} on a retest "
            f"alone against {other}, after the survey's {seen}"), data)
    again = f"retest against {other}: {rate(worst)}" + (
        f"; {retrans} retransmits" if retrans else "")
    if cpu is not None:
        return Finding(NAME, status, (host,), (
            f"{host}: slow host, explained by its CPU ({cpu}): iperf3 and the job's "
            f"communication are CPU-bound there; {seen}; {again}: fix its CPU first "
            "(cpu-cores), not its NIC"),
            {**data, EXPLAINED_BY: explained(host, f"its links are slow: {what} with every "
                                                     f"peer; {yard}")})
    facing = localise.RECEIVE if run.sender == host else localise.SEND
    if loc.suspect(other, facing):
        # No host free of suspicion was left to retest against: the retest's other end is
        # itself suspect in the direction it played. Its own retest against a host free of
        # that suspicion tells: cleared, it is as good as one; confirmed, it is the cause and
        # this host is not blamed; neither, the link is slow but either end's.
        role = "receiving" if facing == localise.RECEIVE else "sending"
        theirs = clean_retest(other, facing, loc, links, ref, healthy, limits)
        if theirs is None:
            pair = f"{host} -> {other}" if run.sender == host else f"{other} -> {host}"
            return Finding(NAME, status, (host, other), (
                f"{pair}: slow link, either end's: {host} {seen}; {again}, and {other} is "
                f"itself suspect of {role} slowly (no host free of suspicion to retest "
                "against)"), data)
        if theirs is not Status.PASS:
            return Finding(NAME, Status.WARN, (host,), (
                f"{host}: could not judge its own links: {seen}; {again}, and {other} is slow "
                f"at {role} (confirmed against a host that is not): no host free of "
                "suspicion was left to retest it against"), data)
    return Finding(NAME, status, (host,), f"{host}: slow host: {seen}; {again}: check its "
                   "NIC, cable, link speed (ethtool) and driver", data)


def _cpu_note(cpu: str | None) -> str:
    return f"; its CPU may explain it ({cpu}): see cpu-cores" if cpu else ""


def _slow_path(sender: str, receiver: str, survey: Sequence[LinkRun],
               links: Sequence[LinkRun], ref: float | None, healthy: Healthy,
               limits: Limits, yard: str, short: Mapping[str, str]) -> Finding:
    """short: the hosts cpu-cores finds short of CPU, and why (an end of the path among
    them explains it better than the switch does)."""
    run = next(r for r in survey if (r.sender, r.receiver) == (sender, receiver))
    assert run.bps is not None
    again = best_retest(links, sender, receiver)
    starved = next((h for h in (sender, receiver) if h in short), None)
    data = {"survey_bps": run.bps, "retest_bps": again.bps if again else None,
            "reference_bps": ref, "retransmits": run.result.retransmits,
            "cpu": short[starved] if starved else None, **healthy.data()}
    pair = f"{sender} -> {receiver}"
    seen = f"{rate(run.bps)} while both hosts are fine with other peers; {yard}"
    if again is None or again.bps is None:
        return Finding(NAME, tiered(run.bps, ref, limits), (sender, receiver),
                       f"{pair}: slow path, {seen}; not confirmed by a retest", data)
    status = confirmed(again.bps, ref, healthy, limits)
    if status is Status.PASS:
        return Finding(NAME, Status.PASS, (sender, receiver), (
            f"{pair}: {cleared_why(again.bps, ref, healthy, limits)}: {rate(again.bps)} on "
            f"a retest alone, after the survey's {seen}"), data)
    if starved is not None:
        return Finding(NAME, status, (sender, receiver), (
            f"{pair}: slow path, explained by {starved}'s CPU ({short[starved]}): "
            f"{seen}; retest {rate(again.bps)}: fix its CPU first (cpu-cores), not the "
            "path"), {**data, EXPLAINED_BY: explained(
                starved, f"the path {pair} is slow: retest {rate(again.bps)}; {yard}")})
    return Finding(NAME, status, (sender, receiver), f"{pair}: slow path, {seen}; retest "
                   f"{rate(again.bps)}: check the switch ports, cabling and routes between "
                   "them", data)


def _shared_bottleneck(paths: Sequence[Finding], survey: Sequence[LinkRun], n_hosts: int,
                       ) -> Finding:
    worst = sorted(paths, key=lambda f: f.data["retest_bps"] or f.data["survey_bps"])
    statuses = {f.status for f in paths}
    status = next((s for s in (Status.FAIL, Status.WARN) if s in statuses), Status.PASS)
    hosts = sorted({h for f in paths for h in f.hosts})
    shown = "; ".join(f"{f.hosts[0]} -> {f.hosts[1]} "
                      f"{rate(f.data['retest_bps'] or f.data['survey_bps'])}"
                      for f in worst[:3])
    return Finding(NAME, status, tuple(hosts), (
        f"{len(paths)} slow paths among {len(hosts)} of {n_hosts} hosts while each host is "
        f"fine with other peers (slowest: {shown}): many pairs slow at once points at a "
        "shared bottleneck (an oversubscribed switch or uplink) rather than single hosts"),
        {"paths": [list(f.hosts) for f in paths], "survey_runs": len(survey)})


def _loss(survey: Sequence[LinkRun], loc: localise.Localisation | None, limits: Limits,
          named: set[str], ref: float | None, cleared: set[tuple[str, ...]],
          short: Mapping[str, str]) -> Iterator[Finding]:
    """Links that lose far more than this cluster's links do, or lose and fall short of the
    median host while no slow host explains it and no retest cleared it: loss on the path.
    The rest is how TCP finds a link's speed (it overflows the bottleneck's queue), not a
    defect."""
    # A run that left no warm-up out (--iperf-warmup 0) counted TCP's slow start with the
    # link's losses: its retransmits are not judged.
    survey = [r for r in survey if r.result.warmup_s != 0]
    rates = [r.result.loss_pct for r in survey if r.result.loss_pct is not None]
    typical = statistics.median(rates) if rates else 0.0
    for r in survey:
        loss = r.result.loss_pct
        if loss is None or loss < limits.link_loss_warn_pct or r.bps is None:
            continue
        if loc is not None and loc.explains(r.sender, r.receiver):
            continue  # the slow host's finding already names it
        outlier = loss >= limits.link_loss_outlier_ratio * typical
        # A deficit counts as the slow paths' does: only if a retest alone did not clear it.
        deficit = (ref is not None and r.bps < limits.link_warn_ratio * ref
                   and (r.sender, r.receiver) not in cleared)
        if not (outlier or deficit):
            continue
        if outlier:
            why = (f"{loss / typical:.2g}x the cluster's typical {typical:.2g}%" if typical
                   else "while the cluster's links typically lose none")
        else:
            why = f"below {limits.link_warn_ratio:.0%} of the median host {rate(ref or 0.0)}"
        named.update((r.sender, r.receiver))
        starved = next((h for h in (r.sender, r.receiver) if h in short), None)
        cause = (f"{starved}'s CPU ({short[starved]}) drops what it cannot take in time: fix "
                 "its CPU first (cpu-cores)" if starved else "loss on the path")
        data: dict[str, object] = {"loss_pct": loss, "retransmits": r.result.retransmits,
                                   "typical_loss_pct": typical,
                                   "cpu": short[starved] if starved else None}
        if starved:
            data[EXPLAINED_BY] = explained(starved, f"{r.sender} -> {r.receiver} loses "
                                                      f"{loss:.2g}% of segments at {rate(r.bps)}")
        yield Finding(NAME, Status.WARN, (r.sender, r.receiver), (
            f"{r.sender} -> {r.receiver}: {loss:.2g}% of segments retransmitted "
            f"({r.result.retransmits}) at {rate(r.bps)}, {why}: {cause}"), data)


def _with_nic_note(f: Finding, net: NetworkTests) -> Finding:
    """A slow or lossy link's finding says what its hosts' NICs counted meanwhile: errors
    point at a cable or NIC; none, at congestion or a queue."""
    if f.status is Status.PASS or f.check != NAME or not f.hosts or f.data.get("cpu") or \
            "could not" in f.message or "iperf3 failed" in f.message:
        return f  # (a host's CPU explains its links: its NIC's counters are beside the point)
    read = [h for h in f.hosts if h in net.nic_counters]
    if not read:
        return f
    faults = {h: net.nic_counters[h].text(NIC_PHYSICAL + NIC_OVERRUN) for h in read}
    faults = {h: t for h, t in faults.items() if t}
    if faults:
        note = "; NIC errors meanwhile: " + "; ".join(
            f"{h} {net.nic_counters[h].interface} {t}" for h, t in faults.items())
    else:
        note = (f"; no NIC errors counted on {hosts_text(read)} meanwhile (congestion or a "
                "queue, not a cable)")
    return replace(f, message=f.message + note,
                   data=dict(f.data, nic_errors={h: dict(net.nic_counters[h].grew)
                                                 for h in read}))


def _nic_faults(net: NetworkTests) -> Iterator[Finding]:
    """A NIC that counted errors while it carried the tests, slow or not."""
    for host, c in net.nic_counters.items():
        physical = c.text(NIC_PHYSICAL)
        overrun = c.text(NIC_OVERRUN)
        data = {"interface": c.interface, "grew": dict(c.grew)}
        if physical:
            yield Finding(NAME, Status.WARN, (host,), f"{host}: NIC {c.interface} counted "
                          f"{physical} while the tests ran: a cable, transceiver or port "
                          "going bad (not congestion)", data)
        if overrun:
            yield Finding(NAME, Status.WARN, (host,), f"{host}: NIC {c.interface} dropped "
                          f"what it could not take off its ring ({overrun}): the host's CPU "
                          "or its ring size (ethtool -g/-G) cannot keep up", data)
