"""What each rank is judged against, followed: its pace, and its busy shares (the job's shape).
Both are first learned over its first window after its warm-up (series.RankSeries.early_rate
and .early). From then on each is re-estimated from the judgements of the last ROLLING_S
that said nothing of the job: every rank warm, no phase, nothing named or warned, the job
not below its pace, none of its hosts gone quiet. Once those judgements span FOLLOW_AFTER_S,
their median replaces what was learned before. A job that got faster after its first minutes
(its data cached, a shorter sequence length, a warmer GPU) is judged against the pace it
keeps now, so a fault that later takes it back below that is seen; a watch that came while
rank 0 evaluated or saved (busy while its peers waited) takes that for the job's shape only
until its steady steps say otherwise, and its later evaluations are said as phases. No
phase, fault or slowdown is learned, as no judgement that says one counts. A drift below
the margin, too small to be said, is followed, at the pace of a median over ROLLING_S."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, Optional, TypeVar

from preflight.watch.medians import median

ROLLING_S = 600.0  # the judgements whose figures make the baseline: the last ten minutes
FOLLOW_AFTER_S = 120.0  # ... once those that said nothing span two minutes at least
# How often the median is taken again: a median of 120 paces a rank, every judgement, is a
# thousand sorts a judgement at 1,024 ranks, for a figure that moves over minutes.
FOLLOW_EVERY_S = 30.0

T = TypeVar("T")


class Rolling(Generic[T]):
    """Figures kept per key at the judgements that said nothing, over the last ROLLING_S:
    [(the controller's time, the figure)]."""

    def __init__(self) -> None:
        self.seen: dict[Hashable, deque[tuple[float, T]]] = {}
        self.taken: dict[Hashable, float] = {}  # when each median was last taken

    def due(self, key: Hashable, now: float, value: T) -> Optional[list[T]]:
        """Keeps value; returns the figures kept for key once they span FOLLOW_AFTER_S,
        every FOLLOW_EVERY_S (a median to take of them), else None."""
        seen = self.seen.setdefault(key, deque())
        seen.append((now, value))
        while seen and seen[0][0] < now - ROLLING_S:
            seen.popleft()
        if seen[-1][0] - seen[0][0] < FOLLOW_AFTER_S or \
                now - self.taken.get(key, -FOLLOW_EVERY_S) < FOLLOW_EVERY_S:
            return None
        self.taken[key] = now
        return [v for _, v in seen]


class Paces(Rolling[float]):
    """Each rank's pace (its progress a second over the window), keyed (rank, unit)."""

    def add(self, key: Hashable, now: float, rate: float) -> Optional[float]:
        """The median of its paces kept, when due (its pace to judge it against from now),
        else None (the pace learned before stands)."""
        kept = self.due(key, now, rate)
        return None if kept is None else median(kept)


class Shapes(Rolling[tuple[float, tuple[T, T]]]):
    """Each rank's two half-windows of figures (series.Span: busy, waiting for a CPU,
    throttled), keyed by rank: the pair whose busy share is the median of those kept stands
    for its first window's (how busy it is by the job's design, what it waited for a CPU
    and was throttled then). One pair kept whole, not each figure's median apart: the
    figures of a half-window belong together."""

    def add(self, key: Hashable, now: float, halves: tuple[T, T],
            busy: float) -> Optional[tuple[T, T]]:
        """busy: its busy share over both halves. The pair at the median busy share of those
        kept (the lower of the middle two), when due, else None (the pair learned before
        stands)."""
        kept = self.due(key, now, (busy, halves))
        if kept is None:
            return None
        ordered = sorted(kept, key=lambda x: x[0])
        return ordered[(len(ordered) - 1) // 2][1]
