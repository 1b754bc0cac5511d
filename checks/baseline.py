"""New hosts against a known-good baseline: every fact that differs, bandwidth within tolerance.

Runs only in an audit (the cluster carries the baseline). Each differing field of each host is
its own finding, so an operator reads exactly what to fix on which node."""

from __future__ import annotations

import time
from collections.abc import Iterator

from preflight.common import localise
from preflight.common.profile import of_host, show, unknown_fields
from preflight.common.units import gbytes, hosts_text, rate
from preflight.model.baseline import LABELS, Audit, Baseline
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status
from preflight.model.measure import NetworkTests

NAME = "baseline"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
In an audit (`preflight audit --baseline`), every fact of each host that differs from the
baseline's profile (GPU model, count and memory, driver, Paddle, CUDA, cuDNN, NCCL, Python, NIC
speed, MTU) is its own finding; bandwidth and all-reduce busbw below the baseline's by more
than `--tolerance` fail, and a baseline older than `--max-age` warns.
"""
WHY = ("A node that drifted from the known-good one (driver, stack, NIC, bandwidth) behaves "
       "differently from the nodes the job was tuned on.")
FIX = ("Bring the node back to the baseline's configuration, or take a new baseline if the "
       "change is meant")
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "hosts are audited against a baseline (preflight audit)"


def when(b: Baseline) -> str:
    """Returns 'baseline of 3 hosts, 2026-11-21 09:12 UTC on ctl' for messages."""
    at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(b.taken_at))
    return f"baseline of {len(b.hosts)} hosts, {at} on {b.taken_on}"


def check(cluster: Cluster) -> Iterator[Finding]:
    audit = cluster.audit
    if audit is None:
        return
    b = audit.baseline
    addresses = {o.host.name: o.host.address for o in cluster.outcomes}
    ref_unknown = unknown_fields(b.reference)
    flagged: set[str] = set()
    for host, facts in cluster.probed():
        p = of_host(facts, addresses[host])
        if p.unknown:
            flagged.add(host)
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                          f"{host}: could not compare with the baseline: {'; '.join(p.unknown)}",
                          {"unknown": list(p.unknown)})
        skip = unknown_fields(p) | ref_unknown
        for field, label in LABELS.items():
            if field in skip:
                continue
            mine, theirs = getattr(p, field), getattr(b.reference, field)
            if mine != theirs:
                flagged.add(host)
                yield Finding(NAME, Status.FAIL, (host,),
                              f"{host}: {label} {show(mine)} != {show(theirs)} in the "
                              f"{when(b)}", {"field": field, "value": mine, "baseline": theirs})
    slow: set[str] = set()
    for f in _measurements(cluster, audit):
        if f.status is not Status.PASS:
            flagged.update(f.hosts)
            if f.data.get("kind") == "link":
                slow.update(f.hosts)
        yield f
    yield from _allreduce(cluster.network, audit, slow)
    ok = [h for h, _ in cluster.probed() if h not in flagged]
    if ok:
        r = b.reference
        yield Finding(NAME, Status.PASS, tuple(ok), (
            f"{hosts_text(ok)}: as in the {when(b)}: paddle {show(r.paddle)}, "
            f"{show(r.gpu_count)} x GPU {show(r.gpu_model)}, driver {show(r.driver)}, "
            f"MTU {show(r.mtu)}"
            + (f", links >= {1 - audit.tolerance:.0%} of {rate(b.link_bps)}"
               if b.link_bps and cluster.network else "")), {})


def _measurements(cluster: Cluster, audit: Audit) -> Iterator[Finding]:
    b, net = audit.baseline, cluster.network
    hosts = tuple(h for h, _ in cluster.probed())
    if not b.measured:
        return
    if net is None:
        yield Finding(NAME, Status.WARN, hosts, "bandwidth not compared with the baseline: "
                      "no network tests in this run (--no-network-tests, or a single host)",
                      {"kind": "unmeasured"})
        return
    age = audit.now - b.taken_at
    if age > audit.max_age_s:
        # A stale figure may hide a fabric that changed since; the comparison still runs.
        yield Finding(NAME, Status.WARN, (), (
            f"the baseline's measurements are {age / 3600:.1f} h old (limit "
            f"{audit.max_age_s / 3600:g} h, {b.path}): record a fresh baseline"),
            {"kind": "age", "age_s": age, "max_age_s": audit.max_age_s})
    if b.link_bps is None:
        return
    floor = (1 - audit.tolerance) * b.link_bps
    runs = [r for r in net.links if r.bps is not None]
    loc = localise.localise(runs, floor)
    yardstick = (f"the {when(b)} measured {rate(b.link_bps)} (median host's best link), "
                 f"tolerance {audit.tolerance:.0%}")
    for host, directions in loc.slow_hosts.items():
        sends = [r.bps for r in runs if r.sender == host and r.bps is not None]
        recvs = [r.bps for r in runs if r.receiver == host and r.bps is not None]
        what = " and ".join(
            f"sends at most {rate(max(sends))}" if d == localise.SEND
            else f"receives at most {rate(max(recvs))}" for d in directions)
        yield Finding(NAME, Status.FAIL, (host,), f"{host}: {what}; {yardstick}",
                      {"kind": "link", "directions": list(directions),
                       "baseline_bps": b.link_bps})
    for sender, receiver in loc.slow_paths:
        bps = min(r.bps for r in runs if (r.sender, r.receiver) == (sender, receiver)
                  and r.bps is not None)
        yield Finding(NAME, Status.FAIL, (sender, receiver),
                      f"{sender} -> {receiver}: {rate(bps)}; {yardstick}",
                      {"kind": "link", "bps": bps, "baseline_bps": b.link_bps})
    measured = {h for r in runs for h in (r.sender, r.receiver)}
    for host in hosts:
        if host not in measured:
            yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                          f"{host}: no iperf3 figure to compare with the baseline: "
                          f"{net.skipped.get(host, 'not measured')}", {"kind": "unmeasured"})


def _allreduce(net: NetworkTests | None, audit: Audit, slow: set[str]) -> Iterator[Finding]:
    ref = audit.baseline.allreduce
    ar = net.allreduce if net else None
    if ref is None or ar is None or ar.error or not ar.sizes:
        return  # a failed all-reduce is the allreduce check's finding
    same = [s for s in ar.sizes if s.nbytes == ref.nbytes]
    if not same:
        yield Finding(NAME, Status.WARN, ar.hosts, (
            f"all-reduce not compared with the baseline: it measured {ref.nbytes >> 20} MiB, "
            "this run other sizes (--allreduce-sizes)"), {"kind": "allreduce"})
        return
    busbw = same[0].busbw
    if busbw >= (1 - audit.tolerance) * ref.busbw:
        return
    text = (f"all-reduce busbw {gbytes(busbw)} at {ref.nbytes >> 20} MiB is below the "
            f"baseline's {gbytes(ref.busbw)} ({ref.backend}, {ref.ranks} ranks; tolerance "
            f"{audit.tolerance:.0%})")
    if slow:
        # The slow links found above account for it: blame them, not every host.
        yield Finding(NAME, Status.WARN, tuple(sorted(slow)),
                      text + f", explained by the slow links of {hosts_text(sorted(slow))}",
                      {"kind": "allreduce", "busbw": busbw, "baseline": ref.busbw})
    else:
        yield Finding(NAME, Status.FAIL, ar.hosts, text,
                      {"kind": "allreduce", "busbw": busbw, "baseline": ref.busbw})
