"""How the bandwidth check judges a suspect's retests: by the best of its runs alone, against
the median host, the spread of the survey's healthy links, and the healthy link measured again
among the retests, in the same minutes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from preflight.checks.common import tier
from preflight.common import localise
from preflight.common.units import rate
from preflight.model.findings import Status
from preflight.model.measure import RETEST, LinkRun
from preflight.model.policy import Limits


def best_retest(runs: Sequence[LinkRun], sender: str, receiver: str) -> LinkRun | None:
    """Returns the best retest of a pair: it is measured alone more than once, and only a
    deficit that even its best run shows is clear (a moment of contention rarely repeats)."""
    again = [r for r in runs if r.phase == RETEST and r.sender == sender
             and r.receiver == receiver and r.bps is not None]
    return max(again, key=lambda r: r.bps or 0.0, default=None)


def tiered(bps: float, ref: float | None, limits: Limits) -> Status:
    """The status a link's rate earns against the median host's tiers and the floor."""
    if limits.link_min_gbps and bps < limits.link_min_gbps * 1e9:
        return Status.FAIL
    if ref is None:
        return Status.PASS
    status, _ = tier(bps, limits.link_warn_ratio * ref, limits.link_fail_ratio * ref,
                     high_is_bad=False)
    return status or Status.PASS


@dataclass(frozen=True)
class Healthy:
    """What this cluster's healthy links reached, against which a retest must show a clear
    deficit: the slowest of them in the survey, and the best run of the healthy link measured
    again beside the retests, in the same minutes (on shared CPUs or a shared fabric, a
    slowdown of everything reads as a deficit against the survey's figures alone)."""

    low: float | None = None
    beside: LinkRun | None = None

    def within(self, bps: float, limits: Limits) -> str | None:
        """Why a retest at bps is within what healthy links reach (None: it is not)."""
        b = self.beside
        if b is not None and b.bps is not None and bps >= limits.link_warn_ratio * b.bps:
            return (f"not a clear deficit (a healthy link measured again alongside, "
                    f"{b.sender} -> {b.receiver}, reached {rate(b.bps)} then)")
        if self.low is not None and bps >= limits.link_warn_ratio * self.low:
            return (f"not a clear deficit (within the spread of this cluster's healthy "
                    f"links, the slowest {rate(self.low)})")
        return None

    def data(self) -> dict[str, object]:
        b = self.beside
        return {"alongside": None if b is None else
                {"sender": b.sender, "receiver": b.receiver, "bps": b.bps}}


def confirmed(bps: float, ref: float | None, healthy: Healthy, limits: Limits) -> Status:
    """The status a retest earns: below the median host's tiers, and also clearly below what
    the cluster's healthy links reach (link_warn_ratio of the slowest one in the survey, and
    of the healthy link measured again alongside), so that links as uneven as this cluster's
    healthy ones (CPU-bound streams, a busy bridge) or slowed together with them are never
    called slow. The absolute floor holds whatever the spread."""
    status = tiered(bps, ref, limits)
    below_floor = bool(limits.link_min_gbps) and bps < limits.link_min_gbps * 1e9
    if status is Status.PASS or below_floor:
        return status
    return Status.PASS if healthy.within(bps, limits) else status


def cleared_why(bps: float, ref: float | None, healthy: Healthy, limits: Limits) -> str:
    """Why a retest cleared a suspect, as the finding's conclusion: fine outright, or within
    what the healthy links reach."""
    if tiered(bps, ref, limits) is Status.PASS:
        return "transient (contention during the survey)"
    return healthy.within(bps, limits) or "transient (contention during the survey)"


def healthy_links(survey: Sequence[LinkRun], links: Sequence[LinkRun],
                  loc: localise.Localisation) -> Healthy:
    """Returns what the healthy links reached. The slowest survey link that no suspicion
    names is the cluster's own noise: on links that the CPU bounds (one stream, one core),
    healthy pairs differ by a third run after run."""
    yardsticks = loc.yardsticks(survey)
    healthy = [r.bps for r in yardsticks if r.bps is not None]
    pairs = {(r.sender, r.receiver) for r in yardsticks}
    beside = [r for r in links if r.phase == RETEST and r.bps is not None
              and (r.sender, r.receiver) in pairs]
    return Healthy(min(healthy) if healthy else None,
                   max(beside, key=lambda r: r.bps or 0.0, default=None))


def in_direction(host: str, direction: str, runs: Sequence[LinkRun]) -> list[LinkRun]:
    """Returns the runs in which host plays direction (SEND: it sends)."""
    return [r for r in runs if (r.sender if direction == localise.SEND else r.receiver) == host]


def against_clean(host: str, direction: str, loc: localise.Localisation,
                  runs: Sequence[LinkRun]) -> list[LinkRun]:
    """Returns the runs in which host plays direction against a host not suspect in the
    direction facing it: the retests that judge host alone."""
    facing = localise.FACING[direction]
    return [r for r in in_direction(host, direction, runs)
            if not loc.suspect(r.receiver if r.sender == host else r.sender, facing)]


def best_retests(links: Sequence[LinkRun]) -> list[LinkRun]:
    """Returns the best retest of each pair measured again, in the pairs' order."""
    pairs = sorted({(r.sender, r.receiver) for r in links if r.phase == RETEST})
    return [b for p in pairs if (b := best_retest(links, *p)) is not None]


def clean_retest(host: str, direction: str, loc: localise.Localisation,
                 links: Sequence[LinkRun], ref: float | None, healthy: Healthy,
                 limits: Limits) -> Status | None:
    """Returns what host's retests in direction earned against hosts not suspect in the
    direction facing it (the worst of them), or None where it had no such retest."""
    out = [confirmed(r.bps or 0.0, ref, healthy, limits)
           for r in against_clean(host, direction, loc, best_retests(links))]
    if not out:
        return None
    return next((s for s in out if s is not Status.PASS), Status.PASS)
