"""The watch's labelled corpus (tests/corpus/watch/cases.yaml): each case a watch's results log
captured on the rig or on a GPU machine, or a seeded synthetic job built from the shapes
captured there, with its label; scored by preflight.watch.score through the replay and a
rehearsing --act. bench/score_watch.py prints the table; tests/unit/watch/test_watch_corpus.py
holds the score to its bar."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from preflight.act.rehearse import Acting, rehearsal
from preflight.config import yamlfile
from preflight.config.errors import InputError
from preflight.config.typed import decode
from preflight.model.watch import WatchPolicy
from preflight.report.jsonreport import write_text_atomic
from preflight.watch.replay import policy_of as replay_policy
from preflight.watch.replay import records, replayed
from preflight.watch.score import Blamed, CaseScore, Fault, FaultScore, Label, score

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "watch")
INDEX = os.path.join(CORPUS, "cases.yaml")

Records = Iterator[tuple[int, dict[str, Any]]]
# --act rehearsed with no cap and no cooldown: every fault and every false blame of a log is
# tried on its own (preflight.watch.score).
ACTING = Acting(max_acts=1 << 30, cooldown_s=0.0)


@dataclass(frozen=True)
class Known:
    """What the rules of today get wrong in a case, as counted: the score must not do worse,
    and a change that does better lowers these (the issue that mends it named in why)."""

    __closed__ = True
    why: str
    false_blames: int = 0
    wrong_actions: int = 0
    missed: int = 0


@dataclass(frozen=True)
class Synthetic:
    """A seeded job of captured shapes (what tests/synthjob.py's job() reads)."""

    __closed__ = True
    seed: int
    hours: float = 1.0
    hosts: int = 4
    ranks_per_host: int = 2
    shape: tuple[str, ...] = ()  # synthjob.SHAPES
    fault: Optional[str] = None  # synthjob.FAULTS
    fault_at_s: float = 600.0
    fault_s: Optional[float] = None  # None: to the end
    interval_s: float = 5.0


@dataclass(frozen=True)
class Entry:
    __closed__ = True
    name: str
    source: str  # rig, gpu, synthetic
    label: Label = Label()
    log: Optional[str] = None  # a watch's log in CORPUS (.jsonl or .jsonl.gz)
    sampler: Optional[str] = None  # one host's sampler lines, as tests/fixtures/watch keeps
    host: str = "host1"  # the sampler's host's name
    synthetic: Optional[Synthetic] = None
    known: Optional[Known] = None
    note: str = ""


@dataclass(frozen=True)
class Case:
    entry: Entry
    records: Callable[[], Records]  # its records, made anew each time
    path: str  # what errors name
    label: Label = field(default_factory=Label)

    @property
    def name(self) -> str:
        return self.entry.name


def load(index: str = INDEX) -> list[Case]:
    """The cases of the index, each with its records; InputError naming the file and field
    where one does not read."""
    doc = yamlfile.read(index)
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise InputError(index, "not a corpus index: a mapping with a list 'cases'")
    out = []
    for i, raw in enumerate(doc["cases"]):
        e = decode(Entry, raw, index, f"case {i} of the corpus")
        sources = [x for x in (e.log, e.sampler, e.synthetic) if x is not None]
        if len(sources) != 1:
            raise InputError(index, f"case {e.name}: give one of log, sampler, synthetic")
        out.append(_case(e, index))
    names = [c.name for c in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(index, f"case {sorted(dup)[0]} is named twice")
    return out


def _case(e: Entry, index: str) -> Case:
    if e.log is not None:
        path = os.path.join(os.path.dirname(index), e.log)
        return Case(e, lambda: records(path), path, e.label)
    if e.sampler is not None:
        path = os.path.join(os.path.dirname(index), e.sampler)
        return Case(e, lambda: _sampler_log(path, e.host), path, e.label)
    from synthjob import job
    assert e.synthetic is not None
    made = job(e.synthetic)
    return Case(e, made.records, f"synthetic {e.name}", made.label(e.label))


def _sampler_log(path: str, host: str) -> Records:
    """One host's sampler lines as a watch's log would hold them: a start record with the
    default settings, each line received as the host's clock says it was taken."""
    with open(path, encoding="utf-8") as fh:
        lines = [ln for ln in fh if ln.strip()]
    t0 = json.loads(lines[0])["t"]
    yield 0, {"type": "start", "at": t0 - 0.5, "hosts": [host], "marker": "",
              "policy": vars(WatchPolicy()), "at_check": {}, "addresses": {}}
    for n, ln in enumerate(lines, 1):
        doc = json.loads(ln)
        yield n, {"type": "sample", "at": doc["t"] + 0.1, "host": host, "sample": doc}


def policy_of(case: Case) -> WatchPolicy:
    """The settings the case's watch judged with, as its start record says them."""
    for _, rec in case.records():
        if rec.get("type") == "start":
            return replay_policy(rec, case.path)
    raise InputError(case.path, "not a watch's log (no start record)")


def scored(case: Case) -> CaseScore:
    """The case replayed by today's rules with --act rehearsed, scored against its label."""
    return score(case.name, case.entry.source, case.label,
                 replayed(case.records(), case.path, rehearsal(ACTING)), policy_of(case))


def kept_score(case: Case) -> CaseScore:
    """scored(case), read back where a run before this one scored the same case (its entry,
    its log's bytes) with the same code (every file of the installed preflight package and
    of the tests that make the synthetic jobs, and the same Python): the score is a function
    of those alone. Kept in the user's cache (PREFLIGHT_CORPUS_CACHE, else
    $XDG_CACHE_HOME/preflight-tests/corpus), as JSON; scored afresh where it is not there."""
    path = os.path.join(corpus_cache(), f"{case_key(case)}.json")
    try:
        with open(path, encoding="utf-8") as fh:
            return score_of(json.load(fh))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    s = scored(case)
    write_text_atomic(path, json.dumps(dataclasses.asdict(s)))
    return s


def corpus_cache() -> str:
    """The directory of kept scores, made private to this user where it is new; refused (a
    fresh temporary one used) where another user owns it or may write in it."""
    where = os.environ.get("PREFLIGHT_CORPUS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "preflight-tests", "corpus")
    os.makedirs(where, mode=0o700, exist_ok=True)
    st = os.lstat(where)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return tempfile.mkdtemp(prefix="preflight-corpus-")
    return where


def case_key(case: Case) -> str:
    """A digest of what a case's score depends on: its entry, its log's bytes, the code."""
    h = hashlib.sha256(code_digest().encode())
    h.update(repr(case.entry).encode())
    for name in (case.entry.log, case.entry.sampler):
        if name is not None:
            with open(os.path.join(CORPUS, name), "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of every file of the installed preflight package (the rules, the replay, the
    rehearsed --act, and all they import), of the tests' modules that build and score the
    synthetic jobs, and of the Python that runs them."""
    import preflight
    h = hashlib.sha256(sys.version.encode())
    top = os.path.dirname(os.path.realpath(preflight.__file__))
    here = os.path.dirname(os.path.abspath(__file__))
    files = [os.path.join(d, f) for d, _, fs in os.walk(top, followlinks=True) for f in fs
             if f.endswith(".py")]
    files += [os.path.join(here, f) for f in ("corpustools.py", "synthjob.py", "watchtools.py")]
    for path in sorted(files):
        with open(path, "rb") as fh:
            h.update(os.path.relpath(path, top).encode() + b"\0" + fh.read() + b"\0")
    return h.hexdigest()


def score_of(doc: dict[str, Any]) -> CaseScore:
    """A CaseScore from its JSON (dataclasses.asdict's shape)."""
    faults = [FaultScore(Fault(**{**f["fault"], "hosts": tuple(f["fault"]["hosts"]),
                                  "causes": tuple(f["fault"]["causes"])}),
                         f["found"], f["found_by"], f["acted"]) for f in doc["faults"]]
    return CaseScore(doc["name"], doc["source"], doc["judgements"], doc["first_at"],
                     doc["job_s"], doc["healthy_s"],
                     [Blamed(**b) for b in doc["false_blames"]],
                     [Blamed(**b) for b in doc["wrong_actions"]], faults)


def problems(case: Case, s: CaseScore) -> list[str]:
    """How the case's score misses its bar: more false blames, wrong actions or missed faults
    than its label's known ones (none where it has none), or fewer (mended: lower them)."""
    known = case.entry.known or Known(why="")
    out = []
    for what, got, bar, seen in (
            ("false blames", len(s.false_blames), known.false_blames,
             [f"{b.check} {b.host} at +{b.at - _first(s):.0f} s: {b.message[:160]}"
              for b in s.false_blames]),
            ("wrong actions", len(s.wrong_actions), known.wrong_actions,
             [f"{b.host} at +{b.at - _first(s):.0f} s" for b in s.wrong_actions]),
            ("missed faults", len(s.missed()), known.missed,
             [f.fault.what for f in s.missed()])):
        if got > bar:
            out.append(f"{case.name}: {got} {what} (bar {bar}): " + "; ".join(seen[:5]))
        elif got < bar:
            out.append(f"{case.name}: {got} {what}, fewer than its known {bar}: mended? lower "
                       f"known.{_key(what)} in {INDEX}")
    return out


def _first(s: CaseScore) -> float:
    return s.first_at if s.first_at is not None else 0.0


def _key(what: str) -> str:
    return {"false blames": "false_blames", "wrong actions": "wrong_actions",
            "missed faults": "missed"}[what]


def table(cases: list[Case], scores: list[CaseScore]) -> list[str]:
    """The score as a Markdown table, a row a case and the totals, then what it misses and
    what is known to be wrong (docs/benchmarks.md holds it)."""
    from preflight.watch.score import spread, totals
    rows = ["| case | source | job-hours | judgements | false blames | wrong actions | "
            "faults found | to finding | to action |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for c, s in zip(cases, scores):
        found = [f.found for f in s.faults if f.found is not None]
        acted = [f.acted for f in s.faults if f.acted is not None]
        mark = " (known)" if c.entry.known else ""
        rows.append(f"| {c.name}{mark} | {s.source} | {s.job_s / 3600:.2f} | {s.judgements} | "
                    f"{len(s.false_blames)} | {len(s.wrong_actions)} | "
                    + (f"{len(found)} of {len(s.faults)}" if s.faults else "healthy")
                    + f" | {spread(found)} | {spread(acted)} |")
    t = totals(scores)
    known = [(c, s) for c, s in zip(cases, scores) if c.entry.known]
    kb = sum(len(s.false_blames) for _, s in known)
    ka = sum(len(s.wrong_actions) for _, s in known)
    rows.append(f"| **all {t.cases}** ({t.healthy_cases} healthy) | | {t.job_hours:.1f} "
                f"({t.healthy_job_hours:.1f} healthy) | {sum(s.judgements for s in scores)} | "
                f"**{t.false_blames}** ({kb} known) | **{t.wrong_actions}** ({ka} known; "
                f"{t.actions_on_healthy} in healthy cases) | {t.found} of {t.faults} "
                f"({100 * t.recall:.0f} %) | {spread(t.to_find)} | {spread(t.to_act)} |")
    by_source: dict[str, float] = {}
    for s in scores:
        by_source[s.source] = by_source.get(s.source, 0.0) + s.healthy_s / 3600
    rows += ["", "Healthy job-hours (no fault holding) by source: " + ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(by_source.items())) + "."]
    missed = [f"{s.name}: {f.fault.what}" for s in scores for f in s.missed()]
    rows += ["", "Missed: " + ("; ".join(missed) if missed else "none") + "."]
    if known:
        rows += ["", "Known to be judged wrong today (each case's label says what and why):"]
        rows += [f"- {c.name}: {len(s.false_blames)} false blames, {len(s.wrong_actions)} "
                 f"wrong actions" + (f", {len(s.missed())} missed" if s.missed() else "")
                 + f": {c.entry.known.why}" for c, s in known if c.entry.known]
    return rows
