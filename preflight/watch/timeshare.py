"""What a job's time goes to, as the watch saw it: each judgement's verdict on the job
(stepping, a checkpoint, an evaluation, waiting on a straggler, hung, ...) counted for the
time since the one before it, kept as spells on the job, and summed for the last window and
since the watch first judged the job. The goodput no anchor measures from outside the job:
the share of its time it stepped.

A judgement's kind is read from its findings by their typed blame (never their words), the
most telling first: a job suspended or hung is that whatever else is said; a rank stopped or
dead, then a rank or link holding the others, then a phase of the job's own; a job whose
ranks still start is starting; a job with a pass line is stepping."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import blame_of
from preflight.watch.medians import median

# The kinds of a job's time, in the order they are said where their shares tie.
KINDS = ("stepping", "checkpoints", "evaluations", "phases", "slowed", "straggler", "stalled",
         "hung", "stopped", "suspended", "starting", "unjudged")
WORDS = {
    "stepping": "stepping",
    "checkpoints": "checkpoints",
    "evaluations": "evaluations",
    "phases": "other phases of its own",
    "slowed": "stepping slowly, no cause seen",
    "straggler": "waiting on a straggler",
    "stalled": "stalled as a whole",
    "hung": "hung",
    "stopped": "with ranks stopped or ended",
    "suspended": "suspended",
    "starting": "starting",
    "unjudged": "not judged",
}
PHASE_KINDS = ("checkpoints", "evaluations", "phases")
# What a judgement counts before a phase, a hang or a straggler can be told: the time those
# relabel once they are (the job stepping, or stepping slowly with no cause seen yet).
SOFT = ("stepping", "slowed")
WINDOW_S = 600.0  # "the last window" of the progress line and the metrics
# A spell is handed to the results log once this long past its end, times --hang-after: a hang
# (or a phase) is told only once it has lasted a while, and relabels the time before.
SETTLE_HANGS = 2.0
# Causes of a rank or link holding its peers back (what a straggler rule blames).
HOLDING = frozenset({"cpu", "pace", "link", "gpu", "frozen", "storage"})
ENDED = frozenset({"stopped", "traced", "exit", "exit-unread", "launch", "lost-host",
                   "job-stopped"})


def kind_of(found: Sequence[Finding], quiet: bool = False,
            persist_s: float = 0.0) -> tuple[Optional[str], float]:
    """The kind of the job's time at a judgement, from the job's findings at it (quiet: a
    host of the job gone quiet), and how far back it held before it could be told (a phase
    is told once it has lasted a window, a hang once no step came for --hang-after: the time
    before, counted as stepping then, is theirs); None where the job has ended (its time no
    longer counts)."""
    checks = {f.check for f in found}
    bad = [f for f in found if f.status in (Status.FAIL, Status.WARN)]
    causes = {blame_of(f).cause for f in bad}
    if "suspended" in checks:
        return "suspended", 0.0
    if "hang" in causes:
        return "hung", max(float(f.data.get("quiet_s") or 0.0) for f in bad
                           if blame_of(f).cause == "hang")
    if causes & ENDED:
        return "stopped", 0.0
    if causes & HOLDING:
        return "straggler", persist_s
    if "stalled" in {f.check for f in bad}:
        return "stalled", persist_s
    if "ended" in checks:
        return None, 0.0
    if quiet:
        return "unjudged", 0.0
    phases = [f for f in found if f.check == "phase"]
    if phases:
        kinds = {str(f.data.get("phase") or "phases") for f in phases}
        return next(k for k in PHASE_KINDS if k in kinds), \
            max(float(f.data.get("phase_s") or 0.0) for f in phases)
    slowed = [f for f in bad if f.check == "progress" and "pace_ratio" in f.data]
    if slowed:
        return "slowed", max(float(f.data.get("slowed_s") or persist_s) for f in slowed)
    if "starting" in checks:
        return "starting", 0.0
    if any(f.check == "progress" and f.status is Status.PASS for f in found):
        return "stepping", 0.0
    return "unjudged", 0.0


@dataclass
class Spell:
    kind: str
    start: float  # the controller's clock
    end: float


@dataclass
class Ledger:
    """A job's time by kind, as spells (consecutive judgements of one kind make one)."""

    spells: list[Spell] = field(default_factory=list)
    last_at: Optional[float] = None  # the judgement counted last
    taken: int = 0  # spells handed to the results log so far (take_closed)

    def add(self, kind: Optional[str], now: float, back_s: float = 0.0) -> None:
        """Counts the time since the last judgement as kind (None: not counted), and the
        time counted as stepping (or slowed) in the back_s before now as kind too (what held
        then was told only now), as far back as the spells not yet handed to the log."""
        before, self.last_at = self.last_at, now
        if kind is None or before is None or now <= before:
            return
        self.spells.append(Spell(kind, before, now))
        if back_s > 0:
            self._relabel(kind, now - back_s)
        self._merge()

    def _relabel(self, kind: str, since: float) -> None:
        out = self.spells[:self.taken]
        for s in self.spells[self.taken:]:
            if s.kind not in SOFT or s.end <= since:
                out.append(s)
            elif s.start >= since:
                out.append(Spell(kind, s.start, s.end))
            else:
                out += [Spell(s.kind, s.start, since), Spell(kind, since, s.end)]
        self.spells = out

    def _merge(self) -> None:
        """Spells of one kind that meet are one (from those not yet handed to the log)."""
        out = self.spells[:self.taken + 1]
        for s in self.spells[self.taken + 1:]:
            last = out[-1]
            if last.kind == s.kind and last.end == s.start:
                last.end = s.end
            else:
                out.append(s)
        self.spells = out

    def seconds(self, since: float = float("-inf")) -> dict[str, float]:
        """Seconds of each kind after since."""
        out: dict[str, float] = {}
        for s in self.spells:
            d = s.end - max(s.start, since)
            if d > 0:
                out[s.kind] = out.get(s.kind, 0.0) + d
        return out

    def take_closed(self, before: float) -> list[Spell]:
        """The spells that ended by before (no later judgement relabels them), not taken
        yet; never the open one."""
        closed = []
        for s in self.spells[self.taken:-1]:
            if s.end > before:
                break
            closed.append(s)
        self.taken += len(closed)
        return closed

    def take_rest(self) -> list[Spell]:
        """Every spell not taken yet, the open one too (the watch's end)."""
        rest = self.spells[self.taken:]
        self.taken = len(self.spells)
        return rest

    def first(self) -> Optional[float]:
        return self.spells[0].start if self.spells else None


def cadence(spells: Sequence[Spell], kind: str, since: float) -> str:
    """How long the kind's spells last and how often they start: "35 s every 70 s"."""
    mine = [s for s in spells if s.kind == kind and s.end > since]
    if not mine:
        return ""
    length = median([s.end - s.start for s in mine])
    starts = [s.start for s in mine]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    return f"{length:.0f} s" + (f" every {median(gaps):.0f} s" if gaps else "")


def shares(seconds: Mapping[str, float], spells: Sequence[Spell], since: float) -> str:
    """"71 % stepping, 22 % checkpoints (35 s every 70 s), 7 % evaluations": each kind of
    1 % or more, the largest first."""
    total = sum(seconds.values())
    if total <= 0:
        return ""
    said = []
    for kind in sorted(seconds, key=lambda k: (-seconds[k], KINDS.index(k))):
        pct = 100 * seconds[kind] / total
        if pct < 1:
            continue
        how = cadence(spells, kind, since) if kind != "stepping" else ""
        said.append(f"{pct:.0f} % {WORDS[kind]}" + (f" ({how})" if how else ""))
    return ", ".join(said)


def summary(ledger: Ledger, now: float, clock: str) -> str:
    """The last window's shares and, when the job was followed longer, those since the
    first judgement (clock: its time of day)."""
    first = ledger.first()
    if first is None:
        return ""
    whole = shares(ledger.seconds(), ledger.spells, first)
    if not whole:
        return ""
    if now - first <= WINDOW_S:
        return f"since {clock} ({_length(now - first)}): {whole}"
    since = now - WINDOW_S
    last = shares(ledger.seconds(since), ledger.spells, since)
    return (f"last {_length(WINDOW_S)}: {last}; since {clock} ({_length(now - first)}): "
            f"{whole}")


def _length(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
