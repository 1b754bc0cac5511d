"""One rank's samples over time: a window of them, when it last made progress, its early
pace and busy shares (what it does before anything changes), and what the rules ask of its
window (its two half-windows, what changed over each), kept until its next sample."""

from __future__ import annotations

from collections import deque
from typing import Any, Literal, NamedTuple, Optional

from preflight.model.watch import RankId, RankSample

# How a job's progress is counted: the step hook where its ranks call it, else the step
# lines of their logs, else the bytes of their logs (any output at all).
Unit = Literal["hook", "steps", "bytes"]
UNIT_WORDS = {"hook": "steps", "steps": "step lines", "bytes": "log bytes"}
UNITS: tuple[Unit, ...] = ("hook", "steps", "bytes")
WARMUP_AT_MOST = 2  # early windows after which a rank that shows no step is taken as warm


_PROGRESS_FIELD = {"hook": "hook_steps", "steps": "log_steps", "bytes": "log_size"}
_UNIT_FIELDS = tuple((u, _PROGRESS_FIELD[u]) for u in UNITS)


def progress(s: RankSample, unit: Unit) -> Optional[int]:
    return getattr(s, _PROGRESS_FIELD[unit])  # type: ignore[no-any-return]


class Span(NamedTuple):
    """What changed for a rank between two of its samples (a tuple: half a dataclass's cost)."""

    t0: float
    t1: float
    progress: Optional[int]
    busy_s: float  # on a CPU or waiting for one
    wait_s: float  # waiting for one
    periods: int
    throttled: int
    # t1 - t0, a field: every rule divides by it, a dozen times a rank a judgement (a
    # property's call each time cost more than the division).
    dt: float


class RankSeries:
    def __init__(self, rid: RankId, keep: int) -> None:
        self.rid = rid
        self.samples: deque[RankSample] = deque(maxlen=keep)
        # Its last sample (samples[-1]), kept as a field: the rules read it of every rank many
        # times a judgement. Set by its first add(): a series is made for its first sample.
        self.latest: RankSample
        # Its last sample with bytes queued to a peer: the link rules skip, at a glance, every
        # rank whose sockets drained throughout their window (most, at every judgement).
        self.queued_at: Optional[float] = None
        self.first_t: Optional[float] = None
        # Per unit: when its count last grew, and the longest spell between two growths.
        self.last_growth: dict[Unit, float] = {}
        self.longest_quiet: dict[Unit, float] = {}
        self.state_since: tuple[str, float] = ("?", 0.0)  # its state, since when
        # Per unit: its rate over its first window (its pace before anything changed).
        self.first: dict[Unit, tuple[float, int]] = {}  # unit -> (t, count) first seen
        self.early_rate: dict[Unit, float] = {}
        self.early_after_s = 15.0  # the window that early_rate spans (the policy's persist)
        # Its first window's two halves (what changed over each; followed: watch/baseline.py)
        # and its first interval alone: how busy it is by the job's design, before anything
        # changed; the samples that bound them until then.
        self.early: Optional[tuple[Span, Span]] = None
        self.first_step: Optional[Span] = None
        self._marks: list[RankSample] = []
        # When its warm-up ended: the first sample at which it stepped (its step hook or its
        # step lines grew), or WARMUP_AT_MOST early windows after its first sample where it
        # shows no steps to count (a PS server, which never steps: its first sample). Its
        # early figures are learned from there: a job watched from its launch spends its
        # first seconds importing, not stepping, and its figures then are no pace or shape
        # of the job.
        self.warm: Optional[float] = None
        self._first_from: Optional[RankSample] = None
        # What the rules asked of the samples as they are (halves(), rules/shared's
        # fallen_pace()), by the question: every rule of a judgement asks them of every rank.
        # Emptied by each new sample (add()), the only change to what they are read from.
        self.memo: dict[tuple[object, ...], Any] = {}

    def add(self, s: RankSample) -> None:
        prev = self.samples[-1] if self.samples else None
        if self.first_t is None:
            self.first_t = s.t
        if self.warm is None:
            if _stepped(prev, s) and prev is not None:
                # It stepped in the interval before s: its early figures start at prev, its
                # first interval at s (the one before holds the end of its start too).
                self.warm = prev.t
                self._learn(prev)
                self._first_from = s
            elif (self.rid.role == "server"  # a PS server never steps: as from its start
                  or s.t - self.first_t >= WARMUP_AT_MOST * self.early_after_s):
                self.warm = s.t
        for unit, field in _UNIT_FIELDS:
            now, before = getattr(s, field), None if prev is None else getattr(prev, field)
            if now is not None and before is not None and now > before:
                last = self.last_growth.get(unit)
                if last is not None:
                    self.longest_quiet[unit] = max(self.longest_quiet.get(unit, 0.0),
                                                   s.t - last)
                self.last_growth[unit] = s.t
            elif now is not None and unit not in self.last_growth:
                self.last_growth[unit] = s.t  # seen, not yet grown: quiet from here
        if s.state != self.state_since[0]:
            self.state_since = (s.state, s.t)
        if self.warm is not None:
            self._learn(s)
        self.samples.append(s)
        self.latest = s
        if s.sendq:
            self.queued_at = s.t
        self.memo.clear()

    def _learn(self, s: RankSample) -> None:
        """Its early figures, from its samples once warm: its pace over its first window, and
        its busy shares over that window's halves and its first interval."""
        for unit, field in _UNIT_FIELDS:
            if unit in self.early_rate:
                continue  # learned: nothing of it changes again
            count = getattr(s, field)
            if count is None:
                continue
            t0, c0 = self.first.setdefault(unit, (s.t, count))
            if unit not in self.early_rate and s.t - t0 >= self.early_after_s:
                self.early_rate[unit] = (count - c0) / (s.t - t0)
        if self.early is None:
            marks = self._marks
            start = self._first_from or (marks[0] if marks else None)
            if self.first_step is None and start is not None and start is not s:
                self.first_step = _between(start, s, "bytes")
            if not marks or s.t - marks[0].t >= self.early_after_s * len(marks) / 2:
                marks.append(s)
            if len(marks) == 3:
                a = _between(marks[0], marks[1], "bytes")  # the unit is not read here
                b = _between(marks[1], marks[2], "bytes")
                if a is not None and b is not None and a.dt > 0 and b.dt > 0:
                    self.early = (a, b)
                self._marks = []

    def halves(self, unit: Unit, persist_s: float, interval_s: float
               ) -> Optional[tuple[Span, Span]]:
        """The rank's change over each half of the persistence window ending at its last
        sample; None until the window is covered. Kept until a sample comes or the question
        changes."""
        key = ("halves", unit, persist_s, interval_s)
        if key in self.memo:
            return self.memo[key]  # type: ignore[no-any-return]
        end = self.latest.t
        start, mid = end - persist_s, end - persist_s / 2
        got: Optional[tuple[Span, Span]] = None
        if self.first_t is not None and self.first_t <= start + interval_s / 2:
            # One pass for both halves (rather than span() each): every rank, every
            # judgement. Backwards, the first seen inside a half is its last.
            lo = start - interval_s / 2
            a0 = a1 = b0 = b1 = None
            for s in reversed(self.samples):
                t = s.t
                if t < lo:
                    break  # in time order: every one before lies before the window too
                if lo <= t <= mid:
                    a1 = a1 or s
                    a0 = s
                if mid <= t <= end:
                    b1 = b1 or s
                    b0 = s
            a, b = _between(a0, a1, unit), _between(b0, b1, unit)
            if a is not None and b is not None and a.dt > 0 and b.dt > 0:
                got = (a, b)
        self.memo[key] = got
        return got

    def span(self, t0: float, t1: float, unit: Unit) -> Optional[Span]:
        """The change between the first sample at or after t0 and the last at or before
        t1; None when fewer than two samples lie there."""
        a = b = None
        for s in self.samples:  # in time order: the first and the last inside
            if t0 <= s.t <= t1:
                if a is None:
                    a = s
                b = s
        return _between(a, b, unit)


def _stepped(a: Optional[RankSample], b: RankSample) -> bool:
    """Whether the rank stepped between its samples a and b: its step hook or its step lines
    grew."""
    if a is None:
        return False
    return any(x is not None and y is not None and y > x
               for x, y in ((a.hook_steps, b.hook_steps), (a.log_steps, b.log_steps)))


def _between(a: Optional[RankSample], b: Optional[RankSample], unit: Unit) -> Optional[Span]:
    """The change from sample a to a later b; None unless they are two samples."""
    if a is None or b is None or a is b:
        return None
    pa, pb = progress(a, unit), progress(b, unit)
    return Span(a.t, b.t, None if pa is None or pb is None else pb - pa,
                (b.run_s + b.wait_s) - (a.run_s + a.wait_s), b.wait_s - a.wait_s,
                (b.periods or 0) - (a.periods or 0),
                (b.throttled or 0) - (a.throttled or 0), b.t - a.t)
