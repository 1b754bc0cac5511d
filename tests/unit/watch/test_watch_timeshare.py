"""What a job's time goes to: each judgement's verdict counted for the time since the one
before (stepping, checkpoints, evaluations, a straggler, a hang, ...), the time a phase or a
straggler held before it could be told counted as theirs, said in the job's pass line for the
last 10 minutes and since the start, in the metrics, in the results log as spells that
survive a killed watch, and as a timeline in `report --html`."""

from __future__ import annotations

import io
import re
from typing import Any

from watchtools import POLICY, cluster, nobody_named, quota_starved, watched

from preflight.model.findings import Status
from preflight.model.watch import Blame, WatchFinding
from preflight.watch import page, replay, timeshare
from preflight.watch.judge import judge
from preflight.watch.record import Record
from preflight.watch.run import _record_time
from preflight.watch.samples import HostStream
from preflight.watch.series import WatchState
from preflight.watch.view import Live

SAVE_LINE = "[2026-11-29 07:30:01] saving checkpoint to ckpt/epoch_3.pdparams"
EVAL_LINE = "[2026-11-29 07:31:00] evaluating on the validation set"


def rhythm(hosts, ckpt_every=120.0, ckpt_for=25.0, eval_every=300.0, eval_for=20.0):
    """change(t): rank 0 saves a checkpoint alone (writing 40 MB/s, its log saying so) for
    ckpt_for every ckpt_every from 60 s, and evaluates alone (no writes) for eval_for every
    eval_every from 150 s; its peers wait in the collective meanwhile."""
    r0 = hosts[0].ranks[0]

    def change(t):
        saving = t >= 60 and (t - 60) % ckpt_every < ckpt_for
        evaluating = t >= 150 and (t - 150) % eval_every < eval_for
        alone = saving or evaluating
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 0.0 if alone else 10.0
            r.busy, r.wait, r.state = (0.02, 0.0, "S") if alone else (0.4, 0.05, "S")
        if alone:
            r0.busy, r0.wait, r0.state = 1.0, 0.02, "R"
        r0.write_rate = 40e6 if saving else 0.0
        r0.last = SAVE_LINE if saving else EVAL_LINE if evaluating else "step 120 loss 0.31"

    return change


def pass_line(findings):
    [line] = [f for f in findings if f.check == "progress" and f.status is Status.PASS]
    return line


def test_checkpoints_and_evaluations_are_counted_apart_with_their_cadence():
    hosts = cluster()
    every: list[Any] = []
    found, state = watched(hosts, 1200, change=rhythm(hosts), every=every, real_clock=True)
    nobody_named(every)
    line = pass_line(found)
    spent = line.data["time_s"]
    # 10 saves of 25 s and 4 evaluations of 20 s from the watch's first judgement (0 s) to
    # its last (1,200 s): each is told a window after it began, and that window is its own.
    assert abs(spent["checkpoints"] - 10 * 25) <= 25, spent
    assert abs(spent["evaluations"] - 4 * 20) <= 20, spent
    assert set(spent) == {"stepping", "checkpoints", "evaluations"}, spent
    assert abs(sum(spent.values()) - 1200) < 1, spent
    said = line.message[line.message.index("its time "):]
    assert re.fullmatch(
        r"its time last 10 min: 7\d % stepping, 2\d % checkpoints \(2\d s every 120 s\), "
        r"\d % evaluations \(\d\d s every (29\d|30\d) s\); since \d\d:\d\d:\d\d \(20 min\): 7\d "
        r"% stepping, 2\d % checkpoints \(2\d s every 120 s\), \d % evaluations \(\d\d s "
        r"every (29\d|30\d) s\)", said), said


def test_a_job_that_only_steps_says_so_and_nothing_else():
    hosts = cluster()
    found, _ = watched(hosts, 100, real_clock=True, every=[])
    said = pass_line(found).message
    assert re.search(r"; its time since \d\d:\d\d:\d\d \(100 s\): 100 % stepping$", said), said


def test_a_save_on_every_rank_is_counted_from_its_start_not_from_when_it_was_told():
    # Every rank writes its shard with no step for 70 s: told only past --hang-after (60 s),
    # the 60 s before it are the save's too, not stepping.
    hosts = cluster()

    def change(t):
        saving = 300 <= t < 370
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 0.0 if saving else 10.0
            r.write_rate = 50e6 if saving else 0.0
            r.busy, r.state = (0.3, "D") if saving else (0.4, "S")

    every: list[Any] = []
    found, state = watched(hosts, 600, change=change, every=every, real_clock=True)
    nobody_named(every)
    # Told as a save once no rank stepped through the window, not warned as a job that slowed
    # with no cause seen.
    assert not any(f.check == "progress" and f.status is Status.WARN
                   for judged in every for f in judged)
    [job] = state.jobs.values()
    spent = job.ledger.seconds()
    assert 60 <= spent["checkpoints"] <= 80, spent
    assert [s.kind for s in job.ledger.spells] == ["stepping", "checkpoints", "stepping"]


def test_a_straggler_counts_as_waiting_on_it_from_the_window_that_showed_it():
    hosts = cluster()
    every: list[Any] = []
    found, state = watched(hosts, 300, change=quota_starved(hosts, at=150), every=every,
                           real_clock=True)
    [job] = state.jobs.values()
    spent = job.ledger.seconds()
    # Held from 150 s to the end (300 s): the window before it was named is its too.
    assert 130 <= spent["straggler"] <= 155, spent
    assert not any(f.check == "progress" and f.status is Status.PASS for f in found)


def test_the_kind_of_a_judgement_follows_the_most_telling_finding():
    hang = WatchFinding("hang", Status.FAIL, ("a",), "no progress", {"quiet_s": 70.0},
                        blame=Blame("hang"))
    phase = WatchFinding("phase", Status.PASS, ("a",), "a save", {"phase": "checkpoints",
                                                                   "phase_s": 20.0},
                         blame=Blame("phase"))
    pace = WatchFinding("progress", Status.PASS, ("a",), "running")
    suspended = WatchFinding("suspended", Status.WARN, ("a",), "suspended",
                             blame=Blame("job-stopped"))
    ended = WatchFinding("ended", Status.PASS, ("a",), "ended")
    assert timeshare.kind_of([phase, hang]) == ("hung", 70.0)
    assert timeshare.kind_of([phase, pace]) == ("checkpoints", 20.0)
    assert timeshare.kind_of([pace]) == ("stepping", 0.0)
    assert timeshare.kind_of([suspended, hang]) == ("suspended", 0.0)
    assert timeshare.kind_of([ended]) == (None, 0.0)
    assert timeshare.kind_of([pace], quiet=True) == ("unjudged", 0.0)
    assert timeshare.kind_of([]) == ("unjudged", 0.0)


def test_the_ledger_relabels_only_what_it_has_not_handed_to_the_log():
    ledger = timeshare.Ledger()
    for t in range(0, 105, 5):
        ledger.add("stepping", float(t))
    assert [(s.kind, s.start, s.end) for s in ledger.spells] == [("stepping", 0.0, 100.0)]
    assert ledger.take_closed(1e9) == []  # the open spell is never handed out
    ledger.add("hung", 105.0, back_s=30.0)
    assert [(s.kind, s.start, s.end) for s in ledger.spells] == [
        ("stepping", 0.0, 75.0), ("hung", 75.0, 105.0)]
    ledger.add("stepping", 110.0)
    assert [s.kind for s in ledger.take_closed(80.0)] == ["stepping"]  # the hung spell: later
    # What the log has is kept: a later hang's look back stops at it.
    ledger.add("hung", 115.0, back_s=100.0)
    assert [(s.kind, s.start, s.end) for s in ledger.spells] == [
        ("stepping", 0.0, 75.0), ("hung", 75.0, 115.0)]
    assert ledger.seconds(since=95.0) == {"hung": 20.0}
    assert [s.kind for s in ledger.take_rest()] == ["hung"]


def logged(hosts, seconds: float, log: str, killed: bool):
    """The watch's loop as run.watch runs it, its results log written: samples as they come,
    a judgement an interval, the settled spells after each; at its end every spell, unless
    it was killed (no end: what it wrote is all there is)."""
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    rec = Record(log)
    rec.event("start", hosts=[h.name for h in hosts], policy=vars(POLICY))
    change = rhythm(hosts)
    for i in range(int(seconds / POLICY.interval_s) + 1):
        t = i * POLICY.interval_s
        change(t)
        for h in hosts:
            line = h.line(POLICY.interval_s)
            tick = streams[h.name].feed(line)
            state.add(tick, received=t)
            rec.sample(h.name, line, tick)
        judge(state, POLICY, t, {}, {}, final=False)
        _record_time(rec, state, t - timeshare.SETTLE_HANGS * POLICY.hang_s)
    if not killed:
        _record_time(rec, state, None)
        rec.event("end", code=0)
    rec.close()
    [job] = state.jobs.values()
    return job.ledger


def test_a_killed_watchs_log_keeps_the_spells_that_had_settled(tmp_path):
    log = str(tmp_path / "killed.jsonl")
    ledger = logged(cluster(), 600, log, killed=True)
    [spells] = replay.read(log).times.values()
    # Each spell once it can no longer be relabelled: 2 x --hang-after past its end.
    settled = 600 - timeshare.SETTLE_HANGS * POLICY.hang_s
    assert spells and max(s.end for s in spells) <= settled
    assert [(s.kind, s.start, s.end) for s in spells] == [
        (s.kind, s.start, s.end) for s in ledger.spells if s.end <= settled]
    assert {s.kind for s in spells} == {"stepping", "checkpoints", "evaluations"}


def test_the_log_keeps_every_spell_and_the_report_shows_them(tmp_path):
    log = str(tmp_path / "watch.jsonl")
    ledger = logged(cluster(), 900, log, killed=False)
    read = replay.read(log)
    [spells] = read.times.values()
    assert [(s.kind, s.start, s.end) for s in spells] == [
        (s.kind, round(s.start, 3), round(s.end, 3)) for s in ledger.spells]
    [said] = [ln for ln in page.text(read) if ln.startswith("job ")]
    assert re.search(r"its time last 10 min: \d+ % stepping, \d+ % checkpoints \(2\d s every "
                     r"120 s\)", said), said
    html = page.page(read)
    assert html.count("<rect ") == len(spells)
    assert "<title>checkpoints: " in html and "<title>evaluations: " in html
    assert "what its time went to" in html


def test_a_jobs_pass_line_is_printed_again_each_window_while_nothing_changes():
    out = io.StringIO()
    live = Live(out, 0, repeat_s=600.0)
    line = WatchFinding("progress", Status.PASS, ("a",), "4 ranks running")
    for t in range(0, 1300, 5):
        live.update([line], at=1_800_000_000.0 + t)
    assert out.getvalue().count("4 ranks running") == 3  # at 0, 600 and 1,200 s
    quiet = io.StringIO()
    live = Live(quiet, 0)  # a replay: only the changes
    for t in range(0, 1300, 5):
        live.update([line], at=1_800_000_000.0 + t)
    assert quiet.getvalue().count("4 ranks running") == 1


def test_the_metrics_carry_each_jobs_time_by_kind():
    from prometheus_client import generate_latest

    from preflight.watch.metrics import Metrics

    hosts = cluster()
    found, state = watched(hosts, 700, change=rhythm(hosts), real_clock=True, every=[])
    metrics = Metrics()
    metrics.update(state, found, POLICY.persist_s / 2, 700.0)
    text = generate_latest(metrics.registry).decode()
    [job] = state.jobs.values()
    spent = job.ledger.seconds()
    got = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'preflight_watch_job_time_seconds\{job="[^"]+",kind="(\w+)"\} (\S+)', text)}
    assert set(got) == set(timeshare.KINDS)
    assert got["checkpoints"] == spent["checkpoints"] > 0 and got["hung"] == 0
    window = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'preflight_watch_job_window_time_seconds\{job="[^"]+",kind="(\w+)"\} (\S+)', text)}
    assert abs(sum(window.values()) - 600) < 1  # the last 10 minutes of 700 counted


def test_a_job_slowed_with_no_cause_seen_warns_naming_nobody_and_is_counted_so():
    hosts = cluster()

    def change(t):
        for h in hosts:
            h.ranks[0].steps_per_s = 4.0 if 120 <= t < 240 else 10.0

    every: list[Any] = []
    found, state = watched(hosts, 360, change=change, every=every, real_clock=True)
    nobody_named(every)
    warned = [(i * 5, f) for i, judged in enumerate(every) for f in judged
              if f.check == "progress" and f.status is Status.WARN]
    # The samples from 120 s cover the 5 s before them: slowed through the window by 130 s,
    # said once no cause was told for a window more.
    assert warned and [t for t, _ in warned] == list(range(145, 240, 5)), [t for t, _ in warned]
    msg = warned[0][1].message
    assert msg.startswith("the job master 10.0.0.1:6767 steps at 0.40 x its early pace (4 "
                          "against 10 step lines/s a rank) for 30 s, and nothing the watch "
                          "measures sets a rank, host or link apart"), msg
    assert msg.endswith("nobody is named, nothing is acted on"), msg
    # Never passed while it crawls; the pass line is back once it keeps its pace again.
    for t, judged in enumerate(every):
        if 145 <= t * 5 <= 235:
            assert not any(f.check == "progress" and f.status is Status.PASS for f in judged)
    assert pass_line(found).message.count("1.00 x its early pace") == 1
    [job] = state.jobs.values()
    assert 100 <= job.ledger.seconds()["slowed"] <= 125, job.ledger.seconds()
