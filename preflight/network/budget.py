"""The all-reduce sized to a time budget: which message sizes and how many iterations fit,
predicted from the slowest iperf3 link among the ranks (pure).

A ring all-reduce moves 2(n-1)/n of the message over every link, so its time is bound by the
slowest one: S bytes over n ranks take at least 2(n-1)/n * S / B on a link of B bytes/s. Sizes
that cannot fit are dropped, and the run says so; the smallest always runs (the collective
itself is what the check certifies)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.model.measure import ring_seconds

MIB = 1 << 20
# Before every rank joined, the longest stretch in which a healthy run shows no progress is
# one Paddle import (the launcher's, then the worker's: each only says it is done), which the
# probe measured on every host, all importing at once as the ranks do. The launch is cut when
# nothing progressed for twice the slowest host's import, and never sooner than this. There is
# no fixed allowance for the whole launch: it grows with the hosts (from the launch to every
# rank joined took 9.5 s for 8 hosts, 21 s for 16, 45 s for 32 and 86 s for 64 on the 2-core
# test machine), so a fixed figure is either too short for large clusters or too long to
# notice a hung one.
LAUNCH_IDLE_S = 30.0
MARGIN = 2.0  # the collectives get twice the predicted transfer: the model ignores latency
SLACK_S = 10.0  # and this on top, for warm-ups, barriers and a busy host's scheduling


@dataclass(frozen=True)
class SizePlan:
    """What the all-reduce runs: sizes, iterations per size (after one warm-up), the time
    predicted for them, the sizes left out and why, the time the collectives get once every
    rank joined (counted from the measured join, not from the launch), the predicted time of
    the largest single collective, and the per-host hard limit (launch included)."""

    sizes_mib: tuple[float, ...]
    iters: int
    predicted_s: Optional[float]  # None: no link measured to predict from
    dropped: tuple[str, ...]
    timeout_s: float
    collective_s: Optional[float] = None  # None: no prediction, the hard limit governs
    op_s: float = 0.0


def plan_sizes(sizes_mib: Sequence[float], iters: int, ranks: int,
               slowest_bps: Optional[float], budget_s: float, timeout_cap_s: float,
               ) -> SizePlan:
    """Returns the sizes (ascending) and iterations that fit in budget_s at slowest_bps;
    without a measured link, every size as asked and the cap as the time limit."""
    wanted = sorted(set(sizes_mib))
    if not slowest_bps:
        return SizePlan(tuple(wanted), iters, None, (), timeout_cap_s)

    def cost(mib: float, n_iters: int) -> float:
        return (1 + n_iters) * ring_seconds(mib * MIB, ranks, slowest_bps)

    # Fewer iterations before fewer sizes: the smallest size alone must fit.
    n_iters = iters
    while n_iters > 1 and cost(wanted[0], n_iters) > budget_s:
        n_iters -= 1
    kept: list[float] = []
    dropped: list[str] = []
    spent = 0.0
    for mib in wanted:
        c = cost(mib, n_iters)
        if kept and spent + c > budget_s:
            dropped.append(f"{mib:g} MiB (~{c:.0f} s over {ranks} ranks at the slowest link, "
                           f"past the {budget_s:g} s budget)")
            continue
        kept.append(mib)
        spent += c
    if spent > budget_s:
        dropped.append(f"{kept[0]:g} MiB needs ~{spent:.0f} s even with {n_iters} iteration(s): "
                       f"over the {budget_s:g} s budget, run anyway (the smallest size)")
    collective = MARGIN * spent + SLACK_S
    return SizePlan(tuple(kept), n_iters, spent, tuple(dropped), timeout_cap_s, collective,
                    ring_seconds(kept[-1] * MIB, ranks, slowest_bps))


# Past this many Paddle processes a core, a launch is not waited for any longer.
MAX_CROWDING = 8.0


def launch_idle_s(import_s: Sequence[float], crowding: float = 1.0) -> float:
    """Returns how long the launch may show no progress before it is cut: twice the slowest
    Paddle import the probe measured (alone on its host), times the Paddle processes that
    will import at once on each core of the most crowded kernel (launchers and ranks of
    hosts that share one: containers or namespaces on one machine), never less than
    LAUNCH_IDLE_S."""
    crowding = min(MAX_CROWDING, max(1.0, crowding))
    return max(LAUNCH_IDLE_S, 2 * max(import_s, default=0.0) * crowding)
