"""Localises slow links from iperf3 runs: a slow host (all its links slow) or a slow path.

Pure functions shared by the orchestration (which suspects to retest) and the bandwidth check
(what to blame). The cluster is its own yardstick: a host's best link shows what its NIC and
path can do, and the median of those bests is what a healthy host of this cluster reaches."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from preflight.model.measure import SURVEY, LinkRun

SEND, RECEIVE = "send", "receive"
# The direction a link's other end plays: a sender's link is its receiver's receiving.
FACING = {SEND: RECEIVE, RECEIVE: SEND}
# Fewer hosts leave no majority to compare against: with two, both see the same link.
MIN_HOSTS_RELATIVE = 3


@dataclass(frozen=True)
class Localisation:
    """Hosts whose every link in a direction is below the threshold, and slow paths."""

    threshold_bps: float
    slow_hosts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # host -> directions
    slow_paths: tuple[tuple[str, str], ...] = ()  # (sender, receiver), both fine elsewhere

    def explains(self, sender: str, receiver: str) -> bool:
        """Returns True if a slow host at either end accounts for this link being slow."""
        return (SEND in self.slow_hosts.get(sender, ())
                or RECEIVE in self.slow_hosts.get(receiver, ()))

    def healthy(self, sender: str, receiver: str) -> bool:
        """Returns True if no suspicion touches this link: neither end a slow host, and not
        a slow path itself."""
        return (sender not in self.slow_hosts and receiver not in self.slow_hosts
                and (sender, receiver) not in self.slow_paths)

    def suspect(self, host: str, direction: str) -> bool:
        """Returns True if host is suspect of being slow in direction (SEND or RECEIVE)."""
        return direction in self.slow_hosts.get(host, ())

    def untouched(self, sender: str, receiver: str) -> bool:
        """Returns True if no suspicion bears on this link in its direction: its sender is
        not suspect of sending slowly, its receiver not of receiving slowly, and it is not a
        slow path. A host suspect in one direction still carries the other at full speed."""
        return not self.explains(sender, receiver) and (sender, receiver) not in self.slow_paths

    def yardsticks(self, survey: Sequence[LinkRun]) -> list[LinkRun]:
        """Returns the survey runs that show what this cluster's healthy links reach: those
        no suspicion touches; where every host is suspect in some direction (a survey slowed
        unevenly all over, as on hosts sharing CPUs), those untouched in their direction."""
        runs = [r for r in survey if r.bps is not None]
        return ([r for r in runs if self.healthy(r.sender, r.receiver)]
                or [r for r in runs if self.untouched(r.sender, r.receiver)])

    def alongside(self, survey: Sequence[LinkRun]) -> Optional[tuple[str, str]]:
        """Returns the healthy link to measure again beside the suspects' retests: the
        fastest of the yardsticks (None: none left). Measured in the same minutes, it tells
        a deficit of the suspect from a slowdown of everything (contention for CPUs or a
        fabric the hosts share) that the survey's figures cannot."""
        best = max(self.yardsticks(survey), key=lambda r: r.bps or 0.0,
                   default=None)  # the first of equals
        return (best.sender, best.receiver) if best is not None else None


def measured(runs: Iterable[LinkRun], phase: str = SURVEY) -> list[LinkRun]:
    """Returns the runs of a phase that produced a figure."""
    return [r for r in runs if r.phase == phase and r.bps is not None]


def best_by_host(runs: Sequence[LinkRun]) -> tuple[dict[str, float], dict[str, float]]:
    """Returns ({host: best sending bps}, {host: best receiving bps})."""
    out: dict[str, float] = {}
    into: dict[str, float] = {}
    for r in runs:
        assert r.bps is not None
        out[r.sender] = max(out.get(r.sender, 0.0), r.bps)
        into[r.receiver] = max(into.get(r.receiver, 0.0), r.bps)
    return out, into


def reference_bps(runs: Sequence[LinkRun], line_bps: Optional[Mapping[str, float]] = None,
                  ) -> float | None:
    """Returns the median over hosts of each host's best link, or None with too few hosts;
    never above the median host's negotiated NIC speed where most hosts report one.

    A median of hosts' bests, not of all links: in a ring of three, a slow host touches two
    links of three, and a median of links would call the slow figure normal. Figures above
    what the NICs negotiated measure something else than the links (virtual NICs, CPU-bound
    single streams between them): a link is then judged against its line rate."""
    out, into = best_by_host(runs)
    hosts = set(out) | set(into)
    if len(hosts) < MIN_HOSTS_RELATIVE:
        return None
    ref = statistics.median(max(out.get(h, 0.0), into.get(h, 0.0)) for h in hosts)
    line = [(line_bps or {})[h] for h in hosts if h in (line_bps or {})]
    if 2 * len(line) > len(hosts):
        ref = min(ref, statistics.median(line))
    return ref


# A link carrying this share of what its NICs negotiated runs at line rate: below the
# cluster's other hosts it may be, but its path is not at fault (cpu-cores and nic-speed
# say whether the host is).
LINE_RATE = 0.9


def localise(runs: Sequence[LinkRun], threshold_bps: float,
             line_bps: Optional[Mapping[str, float]] = None) -> Localisation:
    """Returns the slow hosts and slow paths among measured runs, against a threshold;
    line_bps: each host's negotiated NIC speed, where known."""
    line = line_bps or {}

    def below(bps: float, *hosts: str) -> bool:
        rates = [line[h] for h in hosts if h in line]
        at_line_rate = len(rates) == len(hosts) and bps >= LINE_RATE * min(rates)
        return bps < threshold_bps and not at_line_rate

    out, into = best_by_host(runs)
    slow: dict[str, list[str]] = {}
    for host, best in out.items():
        if below(best, host):
            slow.setdefault(host, []).append(SEND)
    for host, best in into.items():
        if below(best, host):
            slow.setdefault(host, []).append(RECEIVE)
    loc = Localisation(threshold_bps, {h: tuple(d) for h, d in slow.items()})
    paths = []
    for r in runs:
        assert r.bps is not None
        if below(r.bps, r.sender, r.receiver) and not loc.explains(r.sender, r.receiver):
            paths.append((r.sender, r.receiver))
    return Localisation(threshold_bps, loc.slow_hosts, tuple(dict.fromkeys(paths)))


def suspect_threshold(runs: Sequence[LinkRun], warn_ratio: float, floor_bps: float,
                      line_bps: Optional[Mapping[str, float]] = None) -> float | None:
    """Returns the figure below which a link is suspect: warn_ratio of the reference, or the
    absolute floor if higher; None when there is neither (too few hosts, no floor)."""
    ref = reference_bps(runs, line_bps)
    candidates = [floor_bps] if floor_bps > 0 else []
    if ref is not None:
        candidates.append(warn_ratio * ref)
    return max(candidates) if candidates else None
