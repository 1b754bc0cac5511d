"""The pace each rank is judged against, followed. A rank's early pace is first learned over
its first window after its warm-up (series.RankSeries.early_rate). From then on it is
re-estimated as the median of its paces at the judgements of the last ROLLING_S that said
nothing of the job: every rank warm, no phase, nothing named or warned, the job not below its
pace, none of its hosts gone quiet. Once those judgements span FOLLOW_AFTER_S, the median
replaces the pace learned before. A job that got faster after its first minutes (its data
cached, a shorter sequence length, a warmer GPU) is judged against the pace it keeps now,
so a fault that later takes it back below that is seen; no phase, fault or slowdown is learned
as its pace, as no judgement that says one counts. A drift below the margin, too small to be
said, is followed, at the pace of a median over ROLLING_S."""

from __future__ import annotations

from collections import deque
from typing import Optional

from preflight.model.watch import RankId
from preflight.watch.medians import median

ROLLING_S = 600.0  # the judgements whose paces make the baseline: the last ten minutes
FOLLOW_AFTER_S = 120.0  # ... once those that said nothing span two minutes at least
# How often the median is taken again: a median of 120 paces a rank, every judgement, is a
# thousand sorts a judgement at 1,024 ranks, for a figure that moves over minutes.
FOLLOW_EVERY_S = 30.0


class Paces:
    """Each rank's pace (per unit of progress) at the judgements that said nothing of its
    job, over the last ROLLING_S: [(the controller's time, its progress a second over the
    window)]."""

    def __init__(self) -> None:
        self.seen: dict[tuple[RankId, str], deque[tuple[float, float]]] = {}
        self.taken: dict[tuple[RankId, str], float] = {}  # when each median was last taken

    def add(self, rid: RankId, unit: str, now: float, rate: float) -> Optional[float]:
        """Keeps the rank's pace over the window at a judgement that said nothing; returns
        the median of those kept once they span FOLLOW_AFTER_S, every FOLLOW_EVERY_S (its
        pace to judge it against from now), else None (the pace learned before stands)."""
        key = (rid, unit)
        seen = self.seen.setdefault(key, deque())
        seen.append((now, rate))
        while seen and seen[0][0] < now - ROLLING_S:
            seen.popleft()
        if seen[-1][0] - seen[0][0] < FOLLOW_AFTER_S or \
                now - self.taken.get(key, -FOLLOW_EVERY_S) < FOLLOW_EVERY_S:
            return None
        self.taken[key] = now
        return median([v for _, v in seen])
