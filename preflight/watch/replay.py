"""A watch's results log read back (`preflight report WATCHLOG`): the samples replayed into
each rank's course over time (its progress rate and busy cores between two of its samples),
and the findings, clearings and actions in the order they happened. A log cut short (the
watch killed) reads as far as it got."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Optional, TextIO, TypeVar

from preflight.config.errors import InputError
from preflight.model.findings import Finding
from preflight.model.watch import ActAt, ActStep, RankId, RankSample, WatchPolicy
from preflight.watch.judge import AtCheck, judge
from preflight.watch.samples import BadSample, HostStream
from preflight.watch.series import UNITS, Unit, WatchState, progress
from preflight.watch.timeshare import KINDS, Spell
from preflight.watch.view import Key, record_key


def _open(path: str) -> TextIO:
    """The log as text: a compressed one (.gz, as a log kept for long is) read as it is."""
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def is_watch_log(path: str) -> bool:
    """True when path starts like a watch's log (its start record)."""
    try:
        with _open(path) as fh:
            first = json.loads(fh.readline(1 << 20))
    except (OSError, ValueError, EOFError):
        return False
    return isinstance(first, dict) and first.get("type") == "start"


@dataclass(frozen=True)
class Point:
    t: float  # the host's clock at the later of the two samples
    rate: Optional[float]  # progress a second in the job's unit; None: not counted
    busy: float  # cores, on a CPU or waiting for one


@dataclass
class RankCourse:
    rid: RankId
    job: str
    samples: list[RankSample] = field(default_factory=list)

    def points(self, unit: Unit) -> list[Point]:
        out = []
        for a, b in zip(self.samples, self.samples[1:]):
            dt = b.t - a.t
            if dt <= 0:
                continue
            pa, pb = progress(a, unit), progress(b, unit)
            rate = None if pa is None or pb is None else max(0, pb - pa) / dt
            busy = max(0.0, (b.run_s + b.wait_s) - (a.run_s + a.wait_s)) / dt
            out.append(Point(b.t, rate, busy))
        return out


@dataclass
class WatchLog:
    path: str
    started: float = 0.0
    ended: Optional[float] = None  # None: the watch was killed before its end record
    code: Optional[int] = None
    hosts: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # finding, cleared, act
    last: list[dict[str, Any]] = field(default_factory=list)
    ranks: dict[RankId, RankCourse] = field(default_factory=dict)
    samples: int = 0
    # The log's thinning (record.py): (when, one sample in `every` kept a host; 0: only those
    # that must be), as it changed.
    thinned: list[tuple[float, int]] = field(default_factory=list)
    # job -> what its time went to, spell by spell, as the watch counted it (timeshare.py)
    times: dict[str, list[Spell]] = field(default_factory=dict)

    def final(self) -> list[dict[str, Any]]:
        """The findings the watch ended with: its last ones; where it was killed before it
        wrote them, those it had said and not cleared when the log was cut."""
        if self.ended is not None or self.last:
            return self.last
        open_: dict[Key, dict[str, Any]] = {}
        for e in self.events:
            k = record_key(e)
            if e.get("type") == "finding":
                open_[k] = e
            elif e.get("type") == "cleared":
                open_.pop(k, None)
        return list(open_.values())

    def jobs(self) -> dict[str, list[RankCourse]]:
        out: dict[str, list[RankCourse]] = {}
        for c in self.ranks.values():
            out.setdefault(c.job, []).append(c)
        for courses in out.values():
            courses.sort(key=lambda c: c.rid.order())
        return out

    @staticmethod
    def unit(courses: Sequence[RankCourse]) -> Unit:
        """The job's unit as the watch counted it: the hook, else step lines, else bytes."""
        for unit in UNITS[:2]:
            if any(progress(s, unit) for c in courses for s in c.samples):
                return unit
        return UNITS[2]


def records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each record of a watch's log; raises InputError naming the
    file and line where it is not one. A last line cut where the watch was killed ends it."""
    try:
        fh = _open(path)
    except OSError as e:
        raise InputError(path, e.strerror or str(e)) from None
    with fh:
        for n, line in _lines(fh, path):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except RecursionError:
                raise InputError(path, "a JSON line nested too deep", line=n) from None
            except ValueError:
                if line.endswith("\n"):
                    raise InputError(path, "not a JSON line", line=n) from None
                return  # the last line, cut where the watch was killed
            if not isinstance(rec, dict):
                raise InputError(path, "not a record", line=n)
            yield n, rec


def _lines(fh: TextIO, path: str) -> Iterator[tuple[int, str]]:
    """(number, line) of fh; a compressed file cut short (the watch killed as it was being
    compressed) ends where it was cut."""
    n = 0
    try:
        for line in fh:
            n += 1
            yield n, line
    except (OSError, EOFError) as e:
        if not path.endswith(".gz"):
            raise InputError(path, str(e), line=n + 1) from None


def read(path: str) -> WatchLog:
    """Reads a watch's log; raises InputError naming the file and line where it is not one."""
    log = WatchLog(path)
    streams: dict[str, HostStream] = {}
    state = WatchState(keep=2)
    for n, rec in records(path):
        try:
            _add(log, rec, n, streams, state)
        except (ValueError, TypeError, OverflowError, KeyError, AttributeError,
                IndexError) as e:  # a record of the wrong shape: the file's, not a bug
            raise InputError(path, f"a record ({str(rec.get('type'))[:20]}) that does not "
                             f"read ({type(e).__name__}: {str(e)[:120]})", line=n) from None
    if not log.started:
        raise InputError(path, "not a watch's log (no start record)")
    for rid, course in log.ranks.items():
        course.job = state.launcher_job.get((rid.host, rid.launcher), course.job)
    return log


def _tick(path: str, streams: dict[str, HostStream], rec: dict[str, Any], n: int) -> Any:
    """The sample record's host's tick (its stream keeps what came before)."""
    host = str(rec.get("host"))
    try:
        return streams.setdefault(host, HostStream(host)).feed(json.dumps(rec["sample"]))
    except (BadSample, KeyError, TypeError) as e:
        raise InputError(path, f"a sample that does not read: {e}", line=n) from None


def _time(rec: Mapping[str, Any], key: str) -> float:
    """A record's time: seconds since the epoch, finite and within what a clock can say (a
    time of day is read off it); ValueError where it is not one."""
    v = rec.get(key) or 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e11:
        raise ValueError(f"{key} is not a time: {str(v)[:40]}")
    return float(v)


# The fields of a finding, cleared or act record as they are read back, and their types.
EVENT_FIELDS: tuple[tuple[str, type], ...] = (
    ("check", str), ("status", str), ("message", str), ("step", str), ("hosts", list))


def _event(rec: dict[str, Any]) -> dict[str, Any]:
    """rec, where each of its fields read back is of its type; TypeError where one is not."""
    _time(rec, "at")
    for key, kind in EVENT_FIELDS:
        if key in rec and rec[key] is not None and not isinstance(rec[key], kind):
            raise TypeError(f"its {key} is not a {kind.__name__}")
    if not all(isinstance(h, str) for h in rec.get("hosts") or ()):
        raise TypeError("its hosts are not names")
    return rec


def _add(log: WatchLog, rec: dict[str, Any], n: int, streams: dict[str, HostStream],
         state: WatchState) -> None:
    kind = rec.get("type")
    if kind == "start":
        log.started = log.started or _time(rec, "at")
        for h in rec.get("hosts") or ():
            if h not in log.hosts:
                log.hosts.append(str(h))
    elif kind == "sample":
        tick = _tick(log.path, streams, rec, n)
        state.add(tick, _time(rec, "at"))
        log.samples += 1
        for rid, s in tick.ranks:
            job = state.launcher_job.get((rid.host, rid.launcher))
            if job is not None:
                log.ranks.setdefault(rid, RankCourse(rid, job)).samples.append(s)
    elif kind in ("finding", "cleared", "act"):
        log.events.append(_event(rec))
    elif kind == "time":
        spent = str(rec.get("spent"))
        if spent in KINDS:  # a kind of a later version's: not this one's to show
            log.times.setdefault(str(rec.get("job")), []).append(
                Spell(spent, _time(rec, "start"), _time(rec, "end")))
    elif kind == "thinned":
        log.thinned.append((_time(rec, "at"), int(rec.get("every") or 0)))
    elif kind == "last":
        log.last.append(_event(rec))
    elif kind == "end":
        code = rec.get("code")
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise TypeError("its code is not an exit code")
        log.ended, log.code = _time(rec, "at"), code
        if rec.get("relaunched"):
            log.last.clear()  # the watch went on with the job launched again


# --act rehearsed, made for a log from its start record and its policy (act/rehearse.py's,
# composed by replaying.py).
Rehearse = Callable[[Mapping[str, Any], WatchPolicy], ActAt]


@dataclass(frozen=True)
class Judgement:
    at: float  # the controller's time it was made (the log's receive times)
    findings: list[Finding]
    acts: tuple[ActStep, ...] = ()  # what --act would have done at it (with rehearse)


def judged_again(path: str, rehearse: Optional[Rehearse] = None) -> list[Judgement]:
    """The log's samples judged again by the rules of this version, as the watch received
    them: once an interval of their receive times, with the policy, the measures at the
    check and the job's addresses its start record keeps. What a watch would have said of
    the same course (the stacks of a hang and the launch's own word are not in the log);
    with rehearse, what --act would have done at each judgement (nothing run)."""
    return list(replayed(records(path), path, rehearse))


def replayed(recs: Iterable[tuple[int, dict[str, Any]]], path: str,
             rehearse: Optional[Rehearse] = None) -> Iterator[Judgement]:
    """judged_again's judgements, one at a time, of the records recs (path names them in
    errors): a long log, or one made as it is judged, is never held whole."""
    start: Optional[dict[str, Any]] = None
    streams: dict[str, HostStream] = {}
    act: Optional[ActAt] = None
    for n, rec in recs:
        if start is None:
            if rec.get("type") != "start":
                continue
            start = rec
            policy = policy_of(start, path)
            at_check = {str(h): _known(AtCheck, a, path, f"at_check of {h}")
                        for h, a in (start.get("at_check") or {}).items()}
            addresses = dict(start.get("addresses") or {})
            state = WatchState.for_policy(policy.interval_s, policy.persist_s)
            next_judge = float(start.get("at") or 0.0) + policy.interval_s
            if rehearse is not None:
                act = rehearse(start, policy)
        at = float(rec.get("at") or 0.0)
        # Each interval the watch judged before this record came (to the log's last one:
        # the watch judged until its end).
        while next_judge <= at:
            found = judge(state, policy, next_judge, at_check, addresses, final=False)
            steps = tuple(act(next_judge, found)) if act is not None else ()
            yield Judgement(next_judge, found, steps)
            next_judge += policy.interval_s
        if rec.get("type") == "sample":
            state.add(_tick(path, streams, rec, n), at)
    if start is None:
        raise InputError(path, "not a watch's log (no start record)")


def policy_of(start: Mapping[str, Any], path: str) -> WatchPolicy:
    """The settings a log's start record says its watch judged with."""
    return _known(WatchPolicy, start.get("policy") or {}, path, "policy")


T = TypeVar("T")


def _known(cls: type[T], doc: object, path: str, what: str) -> T:
    """cls from the fields of doc it knows (a log of another version may have more, or
    fewer where they have defaults); InputError where doc is not such a record."""
    if not isinstance(doc, dict):
        raise InputError(path, f"the start record's {what} is not a record")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    try:
        return cls(**{k: v for k, v in doc.items() if k in known})
    except TypeError as e:
        raise InputError(path, f"the start record's {what} does not read: {e}") from None
