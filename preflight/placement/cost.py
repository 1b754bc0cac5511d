"""What a straggler costs: for each host the plan leaves out whose own links are slower than
the plan's, the time of the job's all-reduce with it and without it, predicted from the
iperf3 links (pure). A ring all-reduce runs at its slowest link, so one slow host makes every
rank wait: the figure an operator weighs against the capacity the host would add.

In a PS job the same host costs a step as a server: every trainer exchanges each step's
rows and gradients with every server, so a server's link carries what all trainers exchange
with it; once that is more than the link moves in a step, every trainer's step waits on it.
Predicted from the PS round's step time and bytes, and the host's iperf3 links."""

from __future__ import annotations

import statistics
from typing import Optional

from preflight.common import localise
from preflight.model.measure import NetworkTests, PsRound, ring_seconds
from preflight.model.plan import Plan, StragglerCost

DEFAULT_NBYTES = 32 << 20  # the all-reduce's largest default size, when none was measured
BASIS = "predicted from the iperf3 links"
PS_BASIS = "predicted from the PS round and the iperf3 links"


def straggler_costs(plan: Plan, network: Optional[NetworkTests]) -> dict[str, StragglerCost]:
    """Returns {left-out host: its cost} for the hosts whose measured links are slower than
    the slowest link among the plan's hosts (the others would cost the ring nothing)."""
    if network is None or len(plan.nodes) < 2 or not plan.excluded:
        return {}
    without_bps = network.slowest_between(plan.hosts())
    if without_bps is None:
        return {}
    if plan.mode == "ps":
        return _server_costs(plan, network, without_bps)
    sizes = network.allreduce.sizes if network.allreduce else ()
    nbytes = max((s.nbytes for s in sizes), default=DEFAULT_NBYTES)
    ranks = sum(n.nproc for n in plan.nodes)
    per_host = plan.nproc_per_node or 1
    out: dict[str, StragglerCost] = {}
    for host, host_bps in _slower(plan, network, without_bps).items():
        out[host] = StragglerCost(
            nbytes, ring_seconds(nbytes, ranks + per_host, host_bps),
            ring_seconds(nbytes, ranks, without_bps), BASIS)
    return out


def _slower(plan: Plan, network: NetworkTests, without_bps: float) -> dict[str, float]:
    """{left-out host: its link's speed} for those measured both ways, slower than the
    slowest link among the plan's hosts (in a ring, and to a server, a host both receives
    and sends: its slower direction is its link)."""
    sends, receives = localise.best_by_host([r for r in network.links if r.bps is not None])
    return {h: min(sends[h], receives[h]) for h in plan.excluded
            if h in sends and h in receives and min(sends[h], receives[h]) < without_bps}


def step_exchange(ps: PsRound) -> Optional[float]:
    """Bytes one trainer step exchanges with one server, its larger direction, from the
    round (each server host's bytes counted once, shared by the servers it ran)."""
    steps = sum(t.steps for t in ps.trainers)
    per_host: dict[str, tuple[int, float]] = {}
    for s in ps.servers:
        if s.rx_bytes is None or s.tx_bytes is None:
            continue
        n, most = per_host.get(s.host, (0, 0.0))
        per_host[s.host] = (n + 1, max(most, float(s.rx_bytes), float(s.tx_bytes)))
    if steps <= 0 or not per_host:
        return None
    return statistics.median(most / n / steps for n, most in per_host.values())


def _server_costs(plan: Plan, network: NetworkTests,
                  without_bps: float) -> dict[str, StragglerCost]:
    ps = network.ps
    if ps is None or ps.failed or not ps.trainers:
        return {}
    exchange = step_exchange(ps)
    steps = [t.median_s for t in ps.trainers if t.median_s]
    if exchange is None or not steps:
        return {}
    step = statistics.median(steps)
    trainers = len(ps.trainers)
    carried = 8 * exchange * trainers  # bits a server's link moves each step
    return {h: StragglerCost(round(exchange), max(step, carried / bps),
                             max(step, carried / without_bps), PS_BASIS, "ps-step",
                             double_at(step, trainers, bps, without_bps))
            for h, bps in _slower(plan, network, without_bps).items()}


def double_at(step_s: float, trainers: int, bps: float, without_bps: float) -> Optional[float]:
    """The bytes a step must exchange with a server for a server on a bps link to double the
    step, the others' links (without_bps) still keeping pace: its link then carries the
    trainers' 8*E*T bits in 2 steps. None where the link is over half the others' (it can
    never cost 2x: at most without_bps / bps)."""
    if without_bps < 2 * bps or trainers <= 0:
        return None
    return 2 * step_s * bps / (8 * trainers)
