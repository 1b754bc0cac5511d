"""What a straggler costs: for each host the plan leaves out whose own links are slower than
the plan's, the time of the job's all-reduce with it and without it, predicted from the
iperf3 links (pure). A ring all-reduce runs at its slowest link, so one slow host makes every
rank wait: the figure an operator weighs against the capacity the host would add."""

from __future__ import annotations

from typing import Optional

from preflight.common import localise
from preflight.model.measure import NetworkTests, ring_seconds
from preflight.model.plan import Plan, StragglerCost

DEFAULT_NBYTES = 32 << 20  # the all-reduce's largest default size, when none was measured
BASIS = "predicted from the iperf3 links"


def straggler_costs(plan: Plan, network: Optional[NetworkTests]) -> dict[str, StragglerCost]:
    """Returns {left-out host: its cost} for the hosts whose measured links are slower than
    the slowest link among the plan's hosts (the others would cost the ring nothing)."""
    if network is None or len(plan.nodes) < 2 or not plan.excluded:
        return {}
    without_bps = network.slowest_between(plan.hosts())
    if without_bps is None:
        return {}
    sizes = network.allreduce.sizes if network.allreduce else ()
    nbytes = max((s.nbytes for s in sizes), default=DEFAULT_NBYTES)
    ranks = sum(n.nproc for n in plan.nodes)
    per_host = plan.nproc_per_node or 1
    runs = [r for r in network.links if r.bps is not None]
    sends, receives = localise.best_by_host(runs)
    out: dict[str, StragglerCost] = {}
    for host in plan.excluded:
        if host not in sends or host not in receives:
            continue  # not measured both ways: nothing to predict from
        # In the ring the host both receives and sends: its slower direction is its link.
        host_bps = min(sends[host], receives[host])
        if host_bps >= without_bps:
            continue
        out[host] = StragglerCost(
            nbytes, ring_seconds(nbytes, ranks + per_host, host_bps),
            ring_seconds(nbytes, ranks, without_bps), BASIS)
    return out
