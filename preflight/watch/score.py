"""How well the watch judges, measured on labelled logs: each case a watch's results log (its
start record and samples, replayed by this version's rules with --act rehearsed) and a label,
what a person would say of it: healthy throughout, or the faults planted, each with its
host(s), the causes that name it right and when it began and ended.

What is counted, at every judgement, not only the last:
- a false blame: a finding that blames a host (any failure; a warning that names a cause) the
  label does not name then. Counted once a finding, from when it appears until it clears;
- a wrong action: a host --act would have left out that no fault then names;
- a fault found: a finding that names its host with one of its causes while it holds (or a
  grace after it was undone, for the window that saw it); the time from its start to the
  first such finding, and to the first action on its host.

Acting is rehearsed with no cap and no cooldown, so that every fault and every false blame
of a log is tried on its own (a cap or a cooldown would only hide those after the first)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import WatchPolicy, blame_of
from preflight.watch.replay import Judgement

# A finding that names a cause blames; these name none, or nobody's host: a job stopped as
# a whole, what could not be measured.
NO_BLAME = ("none", "job-stopped")


@dataclass(frozen=True)
class Fault:
    """A fault planted in a case, as a person names it."""

    __closed__ = True
    what: str  # "SIGSTOP of rank 2"
    hosts: tuple[str, ...]  # the host(s) it lives on: the ones to name, and to act on
    causes: tuple[str, ...]  # the Blame causes that name it right ("stopped", "cpu", ...)
    at: float  # when it began, on the watch's clock (its log's times)
    until: Optional[float] = None  # when it was undone; None: it lasts to the log's end
    act: bool = True  # whether --act should act on it (a fault of the host, not a phase)


@dataclass(frozen=True)
class Label:
    """What a person says of a case: healthy throughout, or these faults."""

    __closed__ = True
    faults: tuple[Fault, ...] = ()
    shape: str = ""  # the job's shape, in words: what its healthy time exercises


@dataclass
class Blamed:
    at: float
    check: str
    host: str
    message: str


@dataclass
class FaultScore:
    fault: Fault
    found: Optional[float] = None  # seconds from its start to the first finding naming it
    found_by: str = ""  # that finding's check and status
    acted: Optional[float] = None  # seconds from its start to the first action on its host


@dataclass
class CaseScore:
    name: str
    source: str  # rig, gpu, synthetic
    judgements: int = 0
    first_at: Optional[float] = None  # its first judgement's time
    job_s: float = 0.0  # the time its judgements covered
    healthy_s: float = 0.0  # of it, the time no fault held (nor its grace after)
    false_blames: list[Blamed] = field(default_factory=list)
    wrong_actions: list[Blamed] = field(default_factory=list)
    faults: list[FaultScore] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.faults

    def missed(self) -> list[FaultScore]:
        return [f for f in self.faults if f.found is None]


def grace(policy: WatchPolicy) -> float:
    """How long after a fault was undone a finding of it may still stand: the window that
    saw it, and a judgement or two for the samples that clear it to come in."""
    return policy.persist_s + 3 * policy.interval_s


def blames(f: Finding) -> bool:
    """Whether the finding holds its hosts responsible: a failure, or a warning that names a
    cause (a PS trainer slow on its own, a GPU slowed, a rank traced)."""
    if f.status is Status.FAIL:
        return True
    return f.status is Status.WARN and blame_of(f).cause not in NO_BLAME


def score(name: str, source: str, label: Label, judgements: Iterable[Judgement],
          policy: WatchPolicy) -> CaseScore:
    """The case's score from its judgements (replayed with --act rehearsed: uncapped, no
    cooldown)."""
    out = CaseScore(name, source, faults=[FaultScore(f) for f in label.faults])
    late = grace(policy)
    open_: set[tuple[str, str]] = set()  # (check, host) falsely blamed at the last judgement
    acting: set[str] = set()  # hosts wrongly acted on at the last judgement (held: once)
    for j in judgements:
        if out.first_at is None:
            out.first_at = j.at
        out.judgements += 1
        live = [s for s in out.faults
                if s.fault.at <= j.at and (s.fault.until is None
                                           or j.at <= s.fault.until + late)]
        if not live:
            out.healthy_s += j.at - out.first_at - out.job_s
        out.job_s = j.at - out.first_at
        now: set[tuple[str, str]] = set()
        for f in j.findings:
            if not blames(f):
                continue
            cause = blame_of(f).cause
            for host in f.hosts:
                mine = [s for s in live if host in s.fault.hosts]
                for s in mine:
                    if s.found is None and cause in s.fault.causes:
                        s.found, s.found_by = j.at - s.fault.at, f"{f.check} {f.status.value}"
                if not mine:
                    now.add((f.check, host))
                    if (f.check, host) not in open_:
                        out.false_blames.append(Blamed(j.at, f.check, host, f.message))
        open_ = now
        acted = {str(h) for a in j.acts if a.step == "check"
                 for h in a.fields.get("leave_out") or ()}
        wrong = set()
        for host in acted:
            mine = [s for s in live if host in s.fault.hosts and s.fault.act]
            for s in mine:
                if s.acted is None:
                    s.acted = j.at - s.fault.at
            if not mine:
                wrong.add(host)
                if host not in acting:
                    out.wrong_actions.append(Blamed(j.at, "act", host, "left out by --act"))
        acting = wrong
    return out


@dataclass(frozen=True)
class Totals:
    cases: int
    healthy_cases: int
    job_hours: float
    healthy_job_hours: float  # no fault holding, in every case
    false_blames: int
    wrong_actions: int
    actions_on_healthy: int  # of them, in healthy cases
    faults: int
    found: int
    to_find: tuple[float, ...]  # seconds, each fault found
    to_act: tuple[float, ...]  # seconds, each fault acted on

    @property
    def recall(self) -> float:
        return self.found / self.faults if self.faults else 1.0


def totals(scores: Sequence[CaseScore]) -> Totals:
    faults = [f for s in scores for f in s.faults]
    return Totals(
        len(scores), sum(s.healthy for s in scores), sum(s.job_s for s in scores) / 3600,
        sum(s.healthy_s for s in scores) / 3600,
        sum(len(s.false_blames) for s in scores), sum(len(s.wrong_actions) for s in scores),
        sum(len(s.wrong_actions) for s in scores if s.healthy), len(faults),
        sum(f.found is not None for f in faults),
        tuple(f.found for f in faults if f.found is not None),
        tuple(f.acted for f in faults if f.acted is not None))


def spread(xs: Sequence[float]) -> str:
    """'median / worst' of some seconds, or '-' where there are none."""
    return f"{statistics.median(xs):.1f} / {max(xs):.1f} s" if xs else "-"
