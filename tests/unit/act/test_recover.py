"""watch --act's decisions, on findings: which host a finding lets it leave out (and which
findings it refuses to act on), the check's command line again without it, the launch again,
and the cap and the cooldown between actions."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
from typing import Any, cast

import pytest

from preflight.act import launches, recover
from preflight.cli import watchcmd
from preflight.common.remote import Done
from preflight.config.errors import UsageError
from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, RankId, WatchFinding


def rid(host, rank=0, role="worker"):
    return RankId(host, role, rank, 100 + rank, 99)


def test_a_straggler_on_its_cpu_is_left_out_and_drained_for_cpu_cores():
    f = WatchFinding("straggler", Status.FAIL, ("h2",), "rank 1 holds its 2 peers back: "
                     "quota", blame=Blame("cpu", ranks=(rid("h2", 1),)))
    found, notes = recover.culprits([f])
    assert found == {"h2": recover.Culprit("h2", "cpu-cores", f.message)} and notes == []


def test_a_slow_link_of_one_host_is_drained_for_bandwidth():
    f = WatchFinding("straggler", Status.FAIL, ("h3",), "h3's link holds the job",
                     blame=Blame("link", pairs=(("h1", "h3"), ("h3", "h2"))))
    found, _ = recover.culprits([f])
    assert found["h3"].check == "bandwidth"


def test_findings_that_name_no_single_host_are_said_not_acted_on():
    link = WatchFinding("straggler", Status.FAIL, ("h1", "h3"), "the link from h1 to h3 holds "
                        "it", blame=Blame("link", pairs=(("h1", "h3"),)))
    hang = WatchFinding("hang", Status.FAIL, ("h1", "h2", "h3"), "no progress",
                        blame=Blame("hang", job="j"))
    lost = WatchFinding("dead", Status.FAIL, ("h2", "h3"), "h2 and h3 went quiet as their "
                        "peers lost one", blame=Blame("lost-host"))
    found, notes = recover.culprits([link, hang, lost])
    assert found == {}
    assert notes == ["h1 and h3: the link between them could be either end's: nothing left out",
                     "the hang names no rank that holds it: nothing to leave out",
                     "h2 and h3: their peers lost one of them, which is not told: nothing "
                     "left out"]


def test_a_slowed_gpu_that_holds_the_job_is_drained_for_gpu_health():
    f = WatchFinding("straggler", Status.FAIL, ("h2",), "rank 1 holds its peers back: its "
                     "GPU is capped", blame=Blame("gpu", ranks=(rid("h2", 1),)))
    found, _ = recover.culprits([f])
    assert found["h2"].check == "gpu-health"


def test_only_a_finding_that_blames_a_cause_is_acted_on_never_one_read_from_its_data():
    # A plain finding with look-alike data blames nobody: not a culprit's.
    f = Finding("straggler", Status.FAIL, ("h2",), "rank 1 holds its peers",
                {"ranks": (rid("h2", 1),)})
    assert recover.culprits([f]) == ({}, [])


def test_a_hang_held_by_a_stopped_rank_leaves_out_its_host():
    hang = WatchFinding("hang", Status.FAIL, ("h2",), "no progress; rank 1 is stopped",
                        blame=Blame("hang", ranks=(rid("h2", 1),)))
    stopped = WatchFinding("stopped", Status.FAIL, ("h2",), "rank 1 is stopped",
                           blame=Blame("stopped", ranks=(rid("h2", 1),)))
    found, _ = recover.culprits([stopped, hang])
    assert list(found) == ["h2"] and found["h2"].check == "reachable"
    assert found["h2"].why == "rank 1 is stopped"  # the first finding that names it


def test_warnings_and_passes_are_never_acted_on():
    slow_alone = WatchFinding("straggler", Status.WARN, ("h2",), "in async mode it slows only "
                              "itself", blame=Blame("pace", ranks=(rid("h2", 1, "trainer"),)))
    fine = WatchFinding("progress", Status.PASS, ("h1", "h2"), "steps at its pace")
    assert recover.culprits([slow_alone, fine]) == ({}, [])


def test_the_check_again_keeps_its_options_and_replaces_outputs_and_limit():
    argv = ["check", "-i", "c.yaml", "--nnodes", "3", "--json", "old.json", "--html=r.html",
            "--limit", "rack1", "--no-progress", "--skip", "clock"]
    assert recover.recheck_argv(argv, ["h2"], "/s/new.json") == [
        "check", "-i", "c.yaml", "--nnodes", "3", "--skip", "clock",
        "--limit", "rack1,!h2", "--json", "/s/new.json", "--no-progress", "--no-step-summary"]
    assert recover.recheck_argv(["check", "-i", "c.yaml"], ["h2", "h5"], "n.json")[3:6] == [
        "--limit", "!h2,!h5", "--json"]


def test_the_launch_again_is_the_same_script_the_same_way():
    launched = launches.Launched("tok", "/r.json", ("h1",), 1.0, ("train.py", "--resume"),
                                 "/work", 3600.0, "slurm")
    assert recover.launch_argv("/s/new.json", launched, True) == [
        "launch", "--plan", "/s/new.json", "--transport", "slurm", "--chdir", "/work",
        "--timeout", "3600", "--accept-new-host-keys", "--", "train.py", "--resume"]


class StopRemote:
    """A host whose stop command is answered: it stopped n processes."""

    def __init__(self, n):
        self.n, self.commands = n, []

    def run(self, command, timeout):
        self.commands.append(command)
        return Done(0, f"stopped {self.n}\n", "")


@pytest.fixture
def old_report(tmp_path):
    """A report of an older preflight: no command line to check again with."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"report_version": 1, "verdict": "go", "reasons": []}))
    return str(path)


def test_acting_stops_the_job_everywhere_and_is_capped(old_report):
    said = []
    remotes: dict[str, Any] = {"h1": StopRemote(2), "h2": StopRemote(1)}
    launched = launches.Launched("abc123", old_report, ("h1", "h2"), 1.0, ("train.py",))
    drained = []

    def drain(why):
        drained.append(why)
        return ["h2 drained"]

    actor = recover.Actor(recover.ActOptions(old_report, launched, max_acts=1, act_after_s=0.0),
                          remotes, lambda step, text, fields: said.append((step, text)),
                          drain)
    f = WatchFinding("stopped", Status.FAIL, ("h2",), "rank 1 is stopped",
                     blame=Blame("stopped", ranks=(rid("h2"),)))
    assert actor([f]) is None  # the report cannot be checked again: the job stays stopped
    assert drained == [{"h2": "reachable: watch: rank 1 is stopped"}]
    assert all("PREFLIGHT_LAUNCH=abc123" in r.commands[0] for r in remotes.values())
    assert said[:3] == [("drain", "h2 drained"), ("stop", "h1: 2 process(es) stopped"),
                        ("stop", "h2: 1 process(es) stopped")]
    assert said[3][0] == "check" and "holds no check command line" in said[3][1]
    n = len(said)
    assert actor([f]) is None and actor([f]) is None
    assert said[n:] == [("skip", "not acting on h2: acted 1 time(s) already (--act-max 1)")]
    assert len(remotes["h1"].commands) == 1  # nothing stopped twice


def test_the_cap_holds_over_the_job_launched_again(old_report):
    """The watch follows a relaunched job with a new Actor: the actions already taken count
    there too, or --act-max 1 would act once per launch, without end."""
    said = []
    acted = recover.Acted()
    f = WatchFinding("dead", Status.FAIL, ("h1",), "rank 0 exited",
                     blame=Blame("exit", ranks=(rid("h1"),)))
    for token in ("abc123", "def456"):  # the first launch, then the one act launched
        launched = launches.Launched(token, old_report, ("h1",), 1.0, ("train.py",))
        actor = recover.Actor(recover.ActOptions(old_report, launched, max_acts=1, act_after_s=0.0,
                                                 cooldown_s=0),
                              {"h1": cast(Any, StopRemote(1))},
                              lambda s, t, f: said.append((s, t)), None, acted)
        actor([f])
    assert [s for s, _ in said].count("stop") == 1
    assert said[-1] == ("skip", "not acting on h1: acted 1 time(s) already (--act-max 1)")


def test_a_second_action_waits_for_the_cooldown(old_report):
    said = []
    launched = launches.Launched("abc123", old_report, ("h1",), 1.0, ("train.py",))
    actor = recover.Actor(recover.ActOptions(old_report, launched, max_acts=3, cooldown_s=600,
                                             act_after_s=0.0),
                          {"h1": cast(Any, StopRemote(1))},
                          lambda s, t, f: said.append((s, t)))
    f = WatchFinding("dead", Status.FAIL, ("h1",), "rank 0 exited",
                     blame=Blame("exit", ranks=(rid("h1"),)))
    actor([f])
    assert said[0] == ("drain", "not drained: no scheduler to drain in")
    n = len(said)
    actor([f])
    assert len(said) == n + 1 and said[-1][1].startswith("not acting on h1 yet: the last "
                                                         "action was 0 s ago")


def test_a_launch_record_keeps_how_it_ran_and_its_slurm_job(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    plan = str(tmp_path / "r.json")
    launches.record("aa11", plan, ["h1", "h2"], ["train.py", "7"], "/work", 600.0, "ssh")
    launches.record("bb22", plan, ["h1"], ["train.py"], None, None, "slurm", "4711")
    newest = launches.newest(plan)
    assert newest is not None and (newest.token, newest.transport, newest.jobid) == \
        ("bb22", "slurm", "4711")
    by_ssh = launches.by_token("aa11")
    assert by_ssh is not None
    assert by_ssh == launches.Launched("aa11", plan, ("h1", "h2"), by_ssh.started,
                                       ("train.py", "7"), "/work", 600.0, "ssh", None,
                                       pid=os.getpid(), pid_start=by_ssh.pid_start)
    assert by_ssh.runs()  # this process launched it, and runs
    (tmp_path / "preflight" / "launches" / "cc33.json").write_text('{"token": "cc33", "pl')
    assert launches.by_token("cc33") is None  # half written: no record


def test_a_launch_record_keeps_the_first_host_whose_launcher_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    launches.record("cc33", str(tmp_path / "r.json"), ["h1", "h2"], ["train.py"])
    started = launches.by_token("cc33")
    assert started is not None and started.failed is None
    launches.failed("cc33", "h2", "exit 247")
    launches.failed("cc33", "h1", "exit 15")  # stopped by the launch after h2: not its cause
    failed = launches.by_token("cc33")
    assert failed is not None and failed.failed is not None
    assert (failed.failed.host, failed.failed.why) == ("h2", "exit 247")
    assert failed.hosts == ("h1", "h2") and failed.script == ("train.py",)
    launches.failed("nosuch", "h1", "exit 1")  # no record: nothing written, nothing raised
    assert launches.by_token("nosuch") is None


def test_a_host_is_acted_on_only_once_named_without_a_break_for_act_after(old_report):
    said: list[tuple[str, str]] = []
    clock = [0.0]
    launched = launches.Launched("abc123", old_report, ("h1", "h2"), 1.0, ("train.py",))
    actor = recover.Actor(recover.ActOptions(old_report, launched),  # the default: 2 minutes
                          {"h1": cast(Any, StopRemote(1)), "h2": cast(Any, StopRemote(1))},
                          lambda s, t, f: said.append((s, t)), clock=lambda: clock[0])
    f = WatchFinding("straggler", Status.FAIL, ("h2",), "rank 1 holds its peers",
                     blame=Blame("cpu", ranks=(rid("h2", 1),)))
    for t in range(0, 120, 5):  # named at every judgement for 115 s
        clock[0] = float(t)
        actor([f])
    assert said == [("wait", "not acting on h2 yet: acted on once it is named without a "
                     "break for 120 s (--act-after; a phase of the job's own pauses the count)")]
    for t in (125, 130):  # two judgements that no longer name it: the wait starts again
        clock[0] = float(t)
        actor([])
    for t in range(135, 255, 5):
        clock[0] = float(t)
        actor([f])
    assert [s for s, _ in said] == ["wait"]
    clock[0] = 255.0
    actor([f])
    assert [s for s, _ in said][1:3] == ["drain", "stop"]


def test_an_action_waits_at_least_as_long_as_the_longest_phase_the_job_showed(old_report):
    said: list[tuple[str, str]] = []
    clock = [0.0]
    launched = launches.Launched("abc123", old_report, ("h1", "h2"), 1.0, ("train.py",))
    actor = recover.Actor(recover.ActOptions(old_report, launched, act_after_s=30.0),
                          {"h1": cast(Any, StopRemote(1)), "h2": cast(Any, StopRemote(1))},
                          lambda s, t, f: said.append((s, t)), clock=lambda: clock[0])
    phase = WatchFinding("phase", Status.PASS, ("h1",), "h1 rank 0 saves", {"phase_s": 90.0},
                         blame=Blame("phase", ranks=(rid("h1", 0),)))
    actor([phase])  # a 90 s save said earlier
    f = WatchFinding("straggler", Status.FAIL, ("h2",), "rank 1 holds its peers",
                     blame=Blame("cpu", ranks=(rid("h2", 1),)))
    for t in range(100, 190, 5):  # named for 85 s: past --act-after, not past the save
        clock[0] = float(t)
        actor([f])
    assert said == [("wait", "not acting on h2 yet: acted on once it is named without a "
                     "break for 90 s (the longest phase this job has shown; a phase of the "
                     "job's own pauses the count)")]
    clock[0] = 190.0
    actor([f])
    assert [s for s, _ in said][1:3] == ["drain", "stop"]


def _clocked_actor(report, said, clock, act_after_s):
    """An Actor on a two-host job, its steps said into said, on the clock given."""
    launched = launches.Launched("abc123", report, ("h1", "h2"), 1.0, ("train.py",))
    return recover.Actor(recover.ActOptions(report, launched, act_after_s=act_after_s),
                         {"h1": cast(Any, StopRemote(1)), "h2": cast(Any, StopRemote(1))},
                         lambda s, t, f: said.append((s, t)), clock=lambda: clock[0])


def _straggler_h2() -> WatchFinding:
    return WatchFinding("straggler", Status.FAIL, ("h2",), "rank 1 holds its peers",
                        blame=Blame("cpu", ranks=(rid("h2", 1),)))


def test_a_phase_of_the_job_or_one_missed_judgement_pauses_the_count_two_end_it(old_report):
    # A straggler under a quota is not named while rank 0 evaluates (every rank waits for
    # rank 0, the straggler too): the count pauses there, and goes on once it is named again.
    said: list[tuple[str, str]] = []
    clock = [0.0]
    actor = _clocked_actor(old_report, said, clock, 60.0)
    f = _straggler_h2()
    phase = WatchFinding("phase", Status.PASS, ("h1",), "h1 rank 0 evaluates", {"phase_s": 15.0},
                         blame=Blame("phase", ranks=(rid("h1", 0),)))

    def judge(t0, t1, found):
        for t in range(t0, t1, 5):
            clock[0] = float(t)
            actor(found)

    judge(0, 40, [f])  # named for 35 s
    judge(40, 60, [phase])  # rank 0 evaluates: paused, not lost
    judge(60, 85, [f])  # named again: 35 + 20 s
    assert [s for s, _ in said] == ["wait"]
    judge(85, 90, [f])  # 60 s named, the 20 s of the phase not counted
    assert [s for s, _ in said][1:3] == ["drain", "stop"]
    # One judgement that misses it (the rules that name it handing over as a phase ends) is
    # bridged, paused; two in a row with no phase of the job's to explain them end the count.
    said.clear()
    actor = _clocked_actor(old_report, said, clock, 60.0)
    judge(100, 150, [f])  # named for 45 s
    judge(150, 155, [])  # missed once: paused
    judge(155, 170, [f])  # 45 + 10 s
    assert [s for s, _ in said] == ["wait"]
    judge(170, 175, [f])  # 60 s named
    assert [s for s, _ in said][1:3] == ["drain", "stop"]
    said.clear()
    actor = _clocked_actor(old_report, said, clock, 60.0)
    judge(200, 250, [f])  # named for 45 s
    judge(250, 260, [])  # missed twice in a row
    judge(260, 315, [f])  # named for 50 s since
    assert [s for s, _ in said] == ["wait"]


def test_judgements_that_could_not_judge_a_host_neither_count_it_nor_end_its_count(old_report):
    # A loaded host's samples come late: the watch cannot judge it for a while. That is no
    # pass: its count stays where it was, and goes on once it is judged (and named) again.
    said: list[tuple[str, str]] = []
    clock = [0.0]
    actor = _clocked_actor(old_report, said, clock, 60.0)
    f = _straggler_h2()
    stale = Finding("watch", Status.COULD_NOT_CHECK, ("h2",),
                    "the samples from h2 arrive 20 s after they were taken: could not judge "
                    "h2 rank 1 (worker)")
    other = Finding("watch", Status.COULD_NOT_CHECK, ("h1",), "no sample from h1 for 16 s")

    def judge(t0, t1, found):
        for t in range(t0, t1, 5):
            clock[0] = float(t)
            actor(found)

    judge(0, 50, [f])  # named for 45 s
    judge(50, 80, [stale])  # not judged for 30 s: neither counted nor missed
    judge(80, 90, [f])  # named on: 45 + 5 + 5 s
    assert [s for s, _ in said] == ["wait"]
    judge(90, 95, [f])  # 60 s named
    assert [s for s, _ in said][1:3] == ["drain", "stop"]
    # Another host's being unjudged is no excuse for this one: missed twice, its count ends.
    said.clear()
    actor = _clocked_actor(old_report, said, clock, 60.0)
    judge(100, 150, [f])
    judge(150, 160, [other])
    judge(160, 215, [f])  # 50 s since: under 60
    assert [s for s, _ in said] == ["wait"]


def test_several_hosts_named_at_once_are_said_and_none_is_left_out(old_report):
    said: list[tuple[str, str]] = []
    launched = launches.Launched("abc123", old_report, ("h1", "h2"), 1.0, ("train.py",))
    actor = recover.Actor(recover.ActOptions(old_report, launched, act_after_s=0.0),
                          {"h1": cast(Any, StopRemote(1)), "h2": cast(Any, StopRemote(1))},
                          lambda s, t, f: said.append((s, t)))
    both = [WatchFinding("stopped", Status.FAIL, (h,), f"{h} rank is stopped",
                         blame=Blame("stopped", ranks=(rid(h),)))
            for h in ("h1", "h2")]
    assert actor(both) is None
    assert said == [("skip", "not acting on h1, h2: 2 hosts named at once are no one host's "
                     "cause; at most one node is left out at a time")]


@pytest.mark.parametrize("error, acted", [
    ("ValueError: bad batch: expected 64 rows, got 63", False),
    ("KeyError: 'label'", False),
    ("RuntimeError: (PreconditionNotMet) NCCL error, unhandled system error", True),
    (None, True),  # killed without a word: the host's (a signal, the OOM killer)
])
def test_a_rank_that_died_of_its_own_codes_error_leaves_no_host_out(error, acted):
    f = WatchFinding("dead", Status.FAIL, ("h2",), f"rank 1 exited with an error: {error}",
                     {"tail": ()}, blame=Blame("exit", ranks=(rid("h2", 1),), error=error))
    found, notes = recover.culprits([f])
    assert (found != {}) == acted, (found, notes)
    if not acted:
        assert notes == [f"h2: its rank ended with an error of the job's own code ({error}): "
                         "a fix of the script, not of the host: nothing left out"]


def test_the_running_launch_of_a_plan_is_its_newest_whose_job_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    plan = str(tmp_path / "r.json")
    launches.record("aa11", plan, ["h1"], ["train.py"])  # this process: it runs
    done = subprocess.Popen(["true"])
    done.wait()
    # A later launch of the same report whose launch process has ended (its job with it).
    path = launches.record("bb22", plan, ["h1"], ["train.py"])
    assert path is not None
    with open(path) as fh:
        doc = json.load(fh)
    doc.update(pid=done.pid, started=doc["started"] + 5)
    with open(path, "w") as fh:
        json.dump(doc, fh)
    newest = launches.newest(plan)
    assert newest is not None and newest.token == "bb22" and not newest.runs()
    running = launches.running(plan)
    assert running is not None and running.token == "aa11" and running.runs()


def test_a_launch_started_just_before_the_watch_is_waited_for_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    plan = str(tmp_path / "r.json")
    assert launches.running(plan, wait_s=0.3, poll_s=0.05) is None  # none: given up, bounded
    later = threading.Timer(0.3, launches.record, ("cc33", plan, ["h1"], ["train.py"]))
    later.start()
    try:
        found = launches.running(plan, wait_s=10.0, poll_s=0.05)
    finally:
        later.join()
    assert found is not None and found.token == "cc33"


def test_act_refuses_in_one_line_a_plan_whose_newest_launch_has_ended(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(launches, "LAUNCH_WAIT_S", 0.2)
    plan = str(tmp_path / "r.json")
    path = launches.record("dd44", plan, ["h1"], ["train.py"])
    assert path is not None
    with open(path) as fh:
        doc = json.load(fh)
    doc["pid_start"] = -1  # its pid now belongs to another process
    with open(path, "w") as fh:
        json.dump(doc, fh)
    args = argparse.Namespace(plan=plan, any_job=False, marker=None, act_max=1,
                              act_cooldown=600.0, accept_new_host_keys=False, act_after=120.0)
    with pytest.raises(UsageError) as e:
        watchcmd.act_options(args)
    said = str(e.value)
    assert "\n" not in said and "the newest preflight launch of" in said, said
    assert "(marker dd44, started " in said and "no longer runs" in said, said


def test_only_a_phase_of_one_host_lengthens_the_wait():
    # A sharded checkpoint (every host writing, no step) names no one host that could be
    # taken for a straggler: the wait is not made as long as it.
    every = WatchFinding("phase", Status.PASS, ("h1", "h2"), "every rank writes files",
                         {"phase_s": 95.0}, blame=Blame("phase"))
    one = WatchFinding("phase", Status.PASS, ("h1",), "h1 rank 0 saves", {"phase_s": 25.0},
                       blame=Blame("phase", ranks=(rid("h1", 0),)))
    assert recover.longest_phase([every, one]) == 25.0
    assert recover.longest_phase([every]) == 0.0
