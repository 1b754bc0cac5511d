"""The all-reduce: it ran on every host, and its busbw is what the links predict or the
policy asks for. A busbw that a slow host already explains is not blamed on every host; a
host that kept the others waiting (failed, never joined, stopped) is named alone; a stall
with nobody to blame is one finding for the cluster; a run cut at its deadline while still
progressing is a warning with the sizes that finished."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status
from preflight.model.measure import AllReduce, SizeResult
from preflight.network import localise
from preflight.report.units import gbytes, hosts_text

NAME = "allreduce"


def sizes_text(sizes: tuple[SizeResult, ...]) -> str:
    return ", ".join(f"{s.nbytes / (1 << 20):g} MiB: busbw {gbytes(s.busbw)} "
                     f"(algbw {gbytes(s.algbw)})" for s in sizes)


def check(cluster: Cluster) -> Iterator[Finding]:
    net = cluster.network
    if net is None:
        return
    for host, why in net.skipped.items():
        if why.startswith("no all-reduce"):
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,), f"{host}: {why}",
                          {"reason": why})
    ar = net.allreduce
    if ar is None:
        if net.allreduce_skipped and net.allreduce_skipped != "turned off":
            yield Finding(NAME, Status.COULD_NOT_CHECK, net.hosts,
                          f"all-reduce not run: {net.allreduce_skipped}", {})
        return
    if ar.outcome == "slow":
        yield _cut(cluster, ar)
        return
    if ar.error or not ar.sizes:
        yield from _failed(ar)
        return
    if ar.expected and ar.backend != ar.expected:
        # Figures of the wrong path pass nothing: gloo over TCP says nothing of NCCL's.
        yield Finding(NAME, Status.FAIL, ar.hosts, (
            f"the all-reduce over {hosts_text(list(ar.hosts))} ran {ar.backend} where "
            f"{ar.expected} was expected: Paddle on the ranks sees no GPU (a container "
            "started without the GPU's compute capability? CUDA_VISIBLE_DEVICES empty? a "
            "CPU build?)"), {"backend": ar.backend, "expected": ar.expected})
        return
    yield _judged(cluster, ar)


def _failed(ar: AllReduce) -> Iterator[Finding]:
    data = {"backend": ar.backend, "hosts": list(ar.hosts), "error": ar.error,
            "outcome": ar.outcome, "progress": dict(ar.progress), "launch_s": ar.launch_s}
    if not ar.failed:
        # Nobody to blame: the cluster's finding (it blocks), not a failure of every host,
        # which would leave the plan empty for what may be one path between two of them.
        yield Finding(NAME, Status.FAIL, (), f"{ar.backend} all-reduce over "
                      f"{hosts_text(list(ar.hosts))} failed: {ar.error or 'no figures'}", data)
        return
    for host, why in ar.failed.items():
        yield Finding(NAME, Status.FAIL, (host,), f"{host}: {ar.backend} all-reduce rank: "
                      f"{why} ({ar.error})", dict(data, log=why))


def _cut(cluster: Cluster, ar: AllReduce) -> Finding:
    """A run cut at its deadline while collectives still completed: slow, not hung. What
    finished is judged like a whole run; the cut itself is a warning."""
    if ar.sizes:
        judged = _judged(cluster, ar)
        status = judged.status if judged.status in (Status.FAIL,) else Status.WARN
        return replace(judged, status=status, message=f"{judged.message}; {ar.cut}",
                       data=dict(judged.data, cut=ar.cut, outcome=ar.outcome))
    culprits = _slow_hosts(cluster)
    explained = (f"; explained by slow {hosts_text(culprits)} (see bandwidth)"
                 if culprits else "")
    return Finding(NAME, Status.WARN, ar.hosts, f"{ar.backend} all-reduce over "
                   f"{hosts_text(list(ar.hosts))}: no size finished: {ar.cut}{explained}",
                   {"backend": ar.backend, "hosts": list(ar.hosts), "cut": ar.cut,
                    "outcome": ar.outcome, "progress": dict(ar.progress)})


def _judged(cluster: Cluster, ar: AllReduce) -> Finding:
    limits = cluster.policy.limits
    big = max(ar.sizes, key=lambda s: s.nbytes)  # the bandwidth-bound figure
    busbw_bits = big.busbw * 8
    survey = localise.measured(cluster.network.links) if cluster.network else []
    slowest = min((r.bps for r in survey if r.bps is not None), default=None)
    culprits = _slow_hosts(cluster)
    left_out = dict(cluster.network.allreduce_left_out) if cluster.network else {}
    data = {"backend": ar.backend, "ranks": ar.ranks, "busbw_bytes": big.busbw,
            "slowest_link_bps": slowest, "sizes": [
                {"bytes": s.nbytes, "seconds": s.seconds, "algbw": s.algbw, "busbw": s.busbw}
                for s in ar.sizes], "log_hints": dict(ar.logs), "hosts": list(ar.hosts),
            "left_out": left_out, "budget_s": ar.budget_s, "dropped": list(ar.dropped),
            "launch_s": ar.launch_s}
    head = (f"{ar.backend} all-reduce over {ar.ranks} ranks on {hosts_text(list(ar.hosts))}: "
            f"{sizes_text(ar.sizes)}")
    if left_out:
        head += f"; not ranks, left out by the plan: {hosts_text(list(left_out))}"
    if ar.dropped:
        head += f"; within the {ar.budget_s:g} s budget, dropped: {'; '.join(ar.dropped)}"
    explained = (f"; explained by slow {hosts_text(culprits)} (see bandwidth)"
                 if culprits else "")
    # A ring all-reduce cannot beat its slowest link; NCCL far below even that one has
    # another problem (a fallback transport, a wrong interface), slow hosts or not. gloo
    # reduces on the CPU and is bound by it, so it has no such prediction to meet.
    if ar.backend == "nccl" and slowest is not None \
            and busbw_bits < limits.busbw_link_ratio * slowest:
        return Finding(NAME, Status.FAIL, ar.hosts, head + f"; far below the slowest link "
                       f"({slowest / 8e9:.3g} GB/s): something beyond the links is wrong"
                       + _hints(ar), data)
    floor = limits.busbw_min_gbytes * 1e9
    if floor and big.busbw < floor and not culprits:
        return Finding(NAME, Status.FAIL, ar.hosts, head + f"; below the policy floor "
                       f"{gbytes(floor)}" + _hints(ar), data)
    if floor and big.busbw < floor:
        return Finding(NAME, Status.PASS, ar.hosts, head + f"; below the floor "
                       f"{gbytes(floor)}" + explained, data)
    return Finding(NAME, Status.PASS, ar.hosts, head + explained, data)


def _hints(ar: AllReduce) -> str:
    if not ar.logs:
        return ""
    host, text = next(iter(ar.logs.items()))
    return f"; {host}'s log: {text[:200]}"


def _slow_hosts(cluster: Cluster) -> list[str]:
    """Returns the hosts the iperf3 survey found slow (the bandwidth check names them)."""
    net = cluster.network
    survey = localise.measured(net.links) if net else []
    limits = cluster.policy.limits
    line = net.line_bps() if net else None
    threshold = localise.suspect_threshold(survey, limits.link_fail_ratio,
                                              limits.link_min_gbps * 1e9, line)
    if threshold is None:
        return []
    return sorted(localise.localise(survey, threshold, line).slow_hosts)
