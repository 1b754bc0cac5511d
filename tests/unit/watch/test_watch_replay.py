"""A watch's log read back (`preflight report WATCHLOG`): samples captured from a real job
replayed into each rank's course, the findings and actions in order, a log cut where the watch
was killed, and what is not a watch's log."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from preflight.config.errors import InputError
from preflight.watch import page, replay

GOLDEN = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "watch"
          / "collective-3.3.1.jsonl")


def write_log(path, last_status="fail", end=True):
    """A watch's log around the captured samples of good1: a finding, its clearing, an act."""
    samples = GOLDEN.read_text().splitlines()
    t0 = json.loads(samples[0])["t"]
    lines = [{"type": "start", "at": t0, "argv": ["watch"], "hosts": ["good1", "good2"],
              "marker": "tok"}]
    for i, s in enumerate(samples):
        lines.append({"type": "sample", "at": t0 + 2 * i, "host": "good1",
                      "sample": json.loads(s)})
    finding = {"check": "straggler", "status": "fail", "hosts": ["good2"],
               "message": "good2 rank 1 (worker) holds its 2 peers back <b>", "ranks": []}
    lines += [{"type": "finding", "at": t0 + 5, **finding},
              {"type": "act", "at": t0 + 6, "step": "stop", "text": "good2: 1 process(es) "
               "stopped", "host": "good2"},
              {"type": "cleared", "at": t0 + 9, **finding},
              {"type": "last", "at": t0 + 20, "check": "progress", "status": last_status,
               "hosts": ["good1"], "message": "steps", "ranks": []}]
    if end:
        lines.append({"type": "end", "at": t0 + 21, "code": 0})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_a_log_reads_back_as_each_ranks_course_and_what_happened(tmp_path):
    log = replay.read(write_log(tmp_path / "w.jsonl"))
    assert log.samples == 11 and log.hosts == ["good1", "good2"] and log.ended is not None
    [(key, courses)] = log.jobs().items()
    assert key.startswith("master ") and len(courses) == 1
    assert log.unit(courses) == "steps"
    points = courses[0].points("steps")
    assert len(points) == 10 and all(p.rate is not None and p.rate > 0 for p in points)
    assert all(0 < p.busy <= 2.5 for p in points)  # a rank on a 2-core host
    assert [e["type"] for e in log.events] == ["finding", "act", "cleared"]
    lines = page.text(log)
    assert lines[0].startswith("watch of 1 job(s) on good[1-2], ")
    assert lines[1].startswith(f"job {key}: 1 ranks on good1, counted in step lines")
    assert "fail     straggler  good2: good2 rank 1 (worker) holds" in lines[2]
    assert "act      stop       good2: 1 process(es) stopped" in lines[3]
    assert "cleared  straggler  good2" in lines[4]
    html = page.page(log)
    assert html.count("<svg") == 2 and "<polyline" in html
    assert "&lt;b&gt;" in html and "<b>" not in html  # a message is text, not markup


def test_a_log_cut_where_the_watch_was_killed_reads_as_far_as_it_got(tmp_path):
    path = write_log(tmp_path / "w.jsonl", end=False)
    with open(path, "a") as fh:
        fh.write('{"type":"sample","at":1,"host":"good1","sample":{"v":1,')  # no newline
    log = replay.read(path)
    assert log.ended is None and log.samples == 11
    assert page.text(log)[0].endswith("; the watch was stopped before its end")


def test_what_is_not_a_watch_log_is_one_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"type":"start","at":1,"hosts":[]}\nnot json\n{"type":"end"}\n')
    with pytest.raises(InputError) as e:
        replay.read(str(path))
    assert "w.jsonl" in str(e.value) and "2" in str(e.value)
    assert not replay.is_watch_log(str(GOLDEN))  # samples alone: no start record


def test_report_renders_a_watch_log_and_exits_on_how_it_ended(tmp_path):
    def report(*args):
        return subprocess.run([sys.executable, "-m", "preflight", "report", *args],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)

    bad = write_log(tmp_path / "bad.jsonl", last_status="fail")
    p = report(bad, "--html", str(tmp_path / "w.html"))
    assert p.returncode == 1 and "straggler" in p.stdout, p.stderr
    assert (tmp_path / "w.html").read_text().startswith("<!DOCTYPE html>")
    good = write_log(tmp_path / "good.jsonl", last_status="pass")
    assert report(good).returncode == 0
    p = report(good, "--junit", str(tmp_path / "x.xml"))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0
    assert "is a watch's log: it renders to the terminal and --html, not --junit" in p.stderr


def test_a_log_cut_while_a_failure_was_open_reports_it_and_exits_1(tmp_path):
    # A watch killed (kill -9, an OOM of the controller) writes neither its last findings
    # nor its end: what it had said and not cleared is how it ended.
    def cut(name, cleared):
        path = pathlib.Path(write_log(tmp_path / name, end=False))
        kept = [ln for ln in path.read_text().splitlines()
                if json.loads(ln)["type"] != "last"
                and (cleared or json.loads(ln)["type"] != "cleared")]
        path.write_text("\n".join(kept) + "\n")
        return str(path)

    still = replay.read(cut("open.jsonl", cleared=False))
    assert still.ended is None and [f["check"] for f in still.final()] == ["straggler"]
    assert replay.read(cut("cleared.jsonl", cleared=True)).final() == []
    for name, cleared, code in (("open2.jsonl", False, 1), ("cleared2.jsonl", True, 0)):
        p = subprocess.run([sys.executable, "-m", "preflight", "report", cut(name, cleared)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert p.returncode == code, (name, p.stdout, p.stderr)


@pytest.mark.parametrize("args, said", [
    (["--interval", "5", "--persist", "8s"], "--persist 8s is shorter than two samples"),
    (["--margin", "0"], "--margin 0 would name a rank a hair slower"),
])
def test_watch_settings_that_cannot_judge_are_refused_before_anything_runs(
        tmp_path, capsys, args, said):
    from preflight.cli import main
    log = tmp_path / "w.jsonl"
    assert main(["watch", "-i", str(tmp_path / "none.yaml"), "--log", str(log), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and err.count("\n") == 0, err
    assert not log.exists()  # refused before the watch opened its log


def test_a_cut_log_ends_with_each_ranks_open_finding_two_of_one_host_included():
    def said(kind, pid):
        return {"type": kind, "check": "straggler", "status": "fail", "hosts": ["good2"],
                "ranks": [{"host": "good2", "role": "worker", "rank": pid - 100, "pid": pid}]}

    log = replay.WatchLog("cut.jsonl", started=1.0, events=[
        said("finding", 102), said("finding", 103), said("cleared", 102), said("finding", 102),
        said("cleared", 103)])
    assert [e["ranks"][0]["pid"] for e in log.final()] == [102]


QUOTA = GOLDEN.parent / "straggler-quota-3.3.1.jsonl"


def _watch(*args, cwd):
    return subprocess.run([sys.executable, "-m", "preflight", "watch", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_replay_says_what_the_watch_would_have_said_and_what_act_would_have_done(tmp_path):
    import gzip
    import time as _time
    recs = [json.loads(ln) for ln in QUOTA.read_text().splitlines()]
    planted = recs[0]["planted"]
    # The whole log: the quota named at the time its samples came, and --act waiting for
    # the next judgement (the log ends before it); exit 1, as --once's on a finding.
    packed = tmp_path / "quota.jsonl.gz"
    with gzip.open(packed, "wt") as fh:
        fh.write(QUOTA.read_text())
    for log in (str(QUOTA), str(packed)):
        p = _watch("--replay", log, cwd=tmp_path)
        assert p.returncode == 1, p.stderr
        named = [ln for ln in p.stdout.splitlines() if " fail     straggler" in ln]
        assert named and "good2 rank 1 (worker) holds its 2 peers back" in named[0]
        stamp = named[0][:8]
        assert _time.strftime("%H:%M:%S", _time.localtime(planted)) <= stamp
        assert "act      wait       not acting on good2 yet" in p.stdout
        assert "--act would have acted 0 time(s)" in p.stdout
    # The healthy stretch alone: nothing named, nothing acted on, exit 0.
    healthy = tmp_path / "healthy.jsonl"
    healthy.write_text("".join(json.dumps(r) + "\n" for r in recs[1:]
                               if r.get("at", 0) < planted))
    p = _watch("--replay", str(healthy), "--act-max", "3", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert " fail " not in p.stdout and "act      " not in p.stdout
    assert "--act would have acted 0 time(s) (--act-max 3, --act-cooldown 600s)" in p.stdout


@pytest.mark.parametrize("other", [["-i", "inv.yaml"], ["--once"], ["--act"],
                                   ["--plan", "r.json"]])
def test_replay_watches_no_hosts_and_refuses_what_would(tmp_path, other):
    p = _watch("--replay", str(QUOTA), *other, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "--replay judges logs, it watches no hosts" in p.stderr


def test_replay_of_what_is_not_a_watch_log_is_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"start","at":1,"hosts":[]}\nnot json\n')
    p = _watch("--replay", str(bad), str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "bad.jsonl" in p.stderr
