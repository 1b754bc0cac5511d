"""The watch's judgement on sampler lines: who is named, for what, and nobody else."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from typing import Any

import pytest
from watchtools import (
    ABORTED,
    POLICY,
    FakeHost,
    FakeRank,
    cluster,
    named,
    nobody_named,
    quota_starved,
    sigkilled,
    watched,
)

from preflight.act import recover
from preflight.act.launch import STOP_WAIT_S
from preflight.model.findings import Status
from preflight.model.watch import LaunchFailure, WatchPolicy, blame_of
from preflight.watch.judge import STALE_FLOOR_S, AtCheck, judge
from preflight.watch.record import finding_doc
from preflight.watch.rules.exits import KILL_AFTER_TERM_S
from preflight.watch.samples import HostStream
from preflight.watch.score import blames
from preflight.watch.series import WatchState
from preflight.watch.view import Live


def test_a_healthy_job_has_only_its_pace():
    every: list[Any] = []
    findings, _ = watched(cluster(), 40, every=every)
    nobody_named(every)
    (f,) = findings
    assert f.check == "progress" and f.hosts == ("node01", "node02", "node03", "node04")
    assert "4 ranks of master 10.0.0.1:6767 running, 10 step lines/s a rank" in f.message


def test_a_throttled_rank_that_keeps_busy_while_the_others_wait_is_the_straggler():
    hosts = cluster()
    findings, _ = watched(hosts, 40, change=quota_starved(hosts),
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]
    msg = findings[0].message
    assert msg.startswith("node02 rank 1 (worker) holds its 3 peers back: busy 0.73 cores "
                          "(on a CPU or waiting for one) while they wait (0.")
    assert "its cgroup's CPU quota throttles it (throttled in 90% of periods)" in msg
    assert "(0.25 of 2 cores now: a cgroup quota set since; 2 at the check)" in msg


def test_both_ranks_of_a_starved_host_are_named_and_each_is_shown():
    # Two ranks a host (--nproc_per_node 2), the host's quota starving both: each is named
    # on its own line (the live view and the log tell findings apart by their ranks too).
    hosts = [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + 2 * i, 2 * i, quota=2.0),
                                          FakeRank(1001 + 2 * i, 2 * i + 1, quota=2.0)],
                      netns=f"net:[{4026532000 + i}]") for i in range(3)]

    def starve(t):
        if t == 10:
            for h in hosts:
                for r in h.ranks:
                    r.steps_per_s, r.busy = 3.0, 0.16
            for r in hosts[1].ranks:
                r.busy, r.wait, r.quota, r.throttled_share, r.state = 0.73, 0.64, 0.1, 0.9, "R"

    findings, _ = watched(hosts, 40, change=starve,
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))] * 2
    assert sorted(r.pid for f in findings for r in blame_of(f).ranks) == [1002, 1003]
    out = io.StringIO()
    new, _ = Live(out, 0).update(findings)
    assert len([f for f in new if f.check == "straggler"]) == 2
    assert out.getvalue().count("straggler") == 2


@pytest.mark.parametrize("untimed", [("node02",), ("node01", "node02", "node03", "node04")])
def test_where_the_kernel_keeps_no_cpu_times_a_starved_rank_could_not_be_checked(untimed):
    # The same throttled rank on a kernel without schedstat: its busy share is unknown, so
    # it is neither named nor passed; no healthy peer is named in its place.
    hosts = cluster()
    for h in hosts:
        h.ranks[0].timed = h.name not in untimed
    findings, _ = watched(hosts, 40, change=quota_starved(hosts),
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    assert named(findings) == [("cpu", Status.WARN, untimed)]
    assert findings[0].message.startswith(
        f"could not check CPU on {'node02' if len(untimed) == 1 else 'node[01-04]'}: the "
        "kernel gives no /proc/PID/schedstat")
    assert f"the time {len(untimed)} of 4 ranks spend on and waiting for a CPU is unknown" \
        in findings[0].message
    assert not [f for f in findings if f.check == "progress"]  # no pass line said


def test_a_healthy_rank_is_not_busier_than_peers_whose_cpu_times_are_unknown():
    # Mixed kernels: zeros read where there is no schedstat are not peers that wait.
    hosts = cluster()
    for h in hosts[:3]:
        h.ranks[0].timed = False
    findings, _ = watched(hosts, 40)
    assert named(findings) == [("cpu", Status.WARN, ("node01", "node02", "node03"))]
    assert not [f for f in findings if f.check == "shape"]  # nor busier by design


def test_a_rank_starved_by_other_work_is_said_to_wait_for_a_cpu():
    hosts = cluster()

    def crowd(t):
        if t == 10:
            for h in hosts:
                h.ranks[0].busy = 0.16
            hosts[2].ranks[0].busy, hosts[2].ranks[0].wait = 0.8, 0.6

    findings, _ = watched(hosts, 40, change=crowd)
    assert named(findings) == [("straggler", Status.FAIL, ("node03",))]
    assert "it waits for a CPU 0.60 s a second (other work on node03" in findings[0].message


@pytest.mark.parametrize("since,is_named", [(35, False), (25, True)],
                         ids=["10s-of-15", "15s-of-15"])
def test_a_busier_rank_is_named_only_once_it_persists_through_the_window(since, is_named):
    hosts = cluster()

    def late(t):  # the sample at t covers the 5 s before it
        if t == since:
            for h in hosts:
                h.ranks[0].busy = 0.16
            hosts[0].ranks[0].busy, hosts[0].ranks[0].wait = 0.9, 0.5  # other work there

    findings, _ = watched(hosts, 40, change=late)
    assert named(findings) == ([("straggler", Status.FAIL, ("node01",))] if is_named else [])


@pytest.mark.parametrize("own,peers", [(0.5, 0.4), (0.4, 0.16), (1.2, 0.9)],
                         ids=["noise", "little-more", "all-busy"])
def test_busy_differences_below_the_bar_name_nobody(own, peers):
    hosts = cluster()
    for h in hosts:
        h.ranks[0].busy = peers
    hosts[0].ranks[0].busy = own
    every: list[Any] = []
    watched(hosts, 40, every=every)
    nobody_named(every)


def test_a_stopped_rank_is_named_at_once_and_nobody_else():
    hosts = cluster()

    def stop(t):
        if t == 35:
            hosts[3].ranks[0].state = "T"

    findings, _ = watched(hosts, 40, change=stop)
    assert named(findings) == [("stopped", Status.FAIL, ("node04",))]
    assert findings[0].message.startswith("node04 rank 3 (worker) is stopped (state T")
    assert "its 3 peers wait on it" in findings[0].message


def test_a_rank_held_by_a_tracer_is_said_never_failed_and_never_acted_on():
    # strace, gdb or a blocking py-spy dump: state t, for one sample or for long.
    from preflight.act.recover import culprits
    hosts = cluster()

    def trace(t):
        if t == 35:
            hosts[3].ranks[0].state = "t"

    findings, _ = watched(hosts, 40, change=trace)
    assert named(findings) == [("traced", Status.WARN, ("node04",))]
    said = findings[0].message
    assert said.startswith("node04 rank 3 (worker) is held by a tracer (state t")
    assert "no fault of its host; not acted on" in said
    assert culprits(findings)[0] == {}


def frozen(hosts, at, which, state):
    """A change that freezes the whole job at time `at`, one rank left in `state`."""
    def change(t):
        if t == at:
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 0.0, 0.0
            hosts[which].ranks[0].state = state
    return change


def test_a_job_a_tracer_holds_past_the_hang_bound_names_it_and_nobody_to_act_on():
    from preflight.act.recover import culprits
    hosts = cluster()
    findings, _ = watched(hosts, 100, change=frozen(hosts, 20, 1, "t"))
    [hang] = [f for f in findings if f.check == "hang"]
    assert "node02 rank 1 (worker) is held by a tracer" in hang.message
    assert "1 traced (node02)" in hang.message and blame_of(hang).ranks == ()
    assert culprits(findings)[0] == {}


def test_a_job_with_no_progress_past_the_hang_bound_is_hung_and_names_the_stopped_rank():
    hosts = cluster()
    findings, _ = watched(hosts, 100, change=frozen(hosts, 20, 1, "T"))
    assert named(findings) == [("stopped", Status.FAIL, ("node02",)),
                               ("hang", Status.FAIL, ("node02",))]
    hang = findings[1].message
    assert hang.startswith("no progress on any of 4 ranks for 85 s")
    assert "node02 rank 1 (worker) is stopped: it holds the rest" in hang
    assert "3 asleep in futex_do_wait (node[01,03-04]); 1 stopped (node02)" in hang


def test_a_job_quiet_for_less_than_five_times_its_longest_quiet_spell_is_not_hung():
    hosts = cluster(steps_per_s=0.0)

    def bursts(t):  # a log line every 30 s: quiet spells of 30 s are its normal
        for h in hosts:
            h.ranks[0].steps_per_s = 0.2 if t % 30 == 0 else 0.0

    findings, _ = watched(hosts, 125, change=bursts,
                          policy=WatchPolicy(interval_s=5.0, persist_s=15.0, hang_s=20.0))
    assert named(findings, "hang") == []


def test_a_rank_gone_while_its_job_runs_on_is_dead():
    hosts = cluster()

    def die(t):
        if t == 30:
            hosts[2].gone = [hosts[2].ranks.pop()]

    findings, _ = watched(hosts, 40, change=die)
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    assert "node03 rank 2 (worker) exited at" in findings[0].message


def test_a_rank_whose_log_ends_in_an_error_died_even_as_its_job_ends():
    hosts = cluster(2)

    def crash(t):
        if t == 35:
            r = hosts[0].ranks.pop()
            r.tail = ("step 80 loss 0.1", "Traceback (most recent call last):",
                      "  File \"train.py\", line 9", "RuntimeError: CUDA out of memory")
            hosts[0].gone = [r]
            hosts[1].gone = [hosts[1].ranks.pop()]

    findings, _ = watched(hosts, 40, change=crash)
    assert named(findings) == [("dead", Status.FAIL, ("node01",))]
    assert findings[0].message.endswith("with an error: RuntimeError: CUDA out of memory")


def test_ranks_that_finish_a_sample_apart_have_ended_not_died():
    hosts = cluster(3)

    def finish(t):
        if t in (30, 35):  # node01 a sample before the others: the job's end
            for h in hosts[:1] if t == 30 else hosts[1:]:
                h.gone = [h.ranks.pop()]

    every: list[Any] = []
    watched(hosts, 40, change=finish, every=every)
    nobody_named(every)


@pytest.mark.parametrize("linger_s,is_dead", [(10, False), (15, True)],
                         ids=["peers-tearing-down", "peers-blocked-on-it"])
def test_a_rank_that_exits_cleanly_while_its_peers_stop_stepping_dies_only_if_they_stay(
        linger_s, is_dead):
    hosts = cluster(3)

    def finish(t):
        if t == 30:  # node03 ends first; its peers step no more, and are still there
            hosts[2].gone = [hosts[2].ranks.pop()]
            for h in hosts[:2]:
                h.ranks[0].steps_per_s = 0.0

    findings, _ = watched(hosts, 30 + linger_s, change=finish)
    assert named(findings) == ([("dead", Status.FAIL, ("node03",))] if is_dead else [])
    if is_dead:
        assert "(2 ranks run 15 s after it)" in findings[0].message


def _killed_then_stopped(hosts):
    """node03's rank killed (its log says nothing), the launch stopping the others a few
    seconds later: every rank gone within a sample."""
    def end(t):
        if t == 30:
            hosts[2].gone = [hosts[2].ranks.pop()]
        if t == 35:
            for h in hosts[:2]:
                h.gone = [h.ranks.pop()]
    return end


@pytest.mark.parametrize("recorded", [False, True], ids=["no-launch-record", "launch-failed"])
def test_a_rank_killed_in_a_launched_job_is_dead_where_the_launch_saw_its_host_fail(recorded):
    hosts = cluster(3)
    state = WatchState(keep=12)
    if recorded:
        state.launch_failure = LaunchFailure("node03", "exit 247", 1.0)
    findings, _ = watched(hosts, 45, change=_killed_then_stopped(hosts), state=state)
    if not recorded:  # the ranks alone cannot tell this end from a finished job's
        assert [f.check for f in findings] == ["ended"]
        return
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    assert findings[0].message.startswith("node03 rank 2 (worker) exited at ")
    assert ("and its launcher failed with it (exit 247: a rank killed by SIGKILL, as the OOM "
            "killer kills): preflight launch stopped the job on every host; its log ends: "
            "step 90 loss 0.1") in findings[0].message


def test_a_failed_launcher_whose_ranks_were_never_seen_is_named_once_the_job_ended():
    hosts = cluster(3)
    hosts[1].ranks.clear()  # node02's launcher ran; its rank never started
    state = WatchState(keep=12)
    state.launch_failure = LaunchFailure("node02", "exit 1", 1.0)

    def stopped(t):
        if t == 30:  # the launch stopped the others: they end as if the job had
            for h in (hosts[0], hosts[2]):
                h.gone = [h.ranks.pop()]

    findings, _ = watched(hosts, 25, change=stopped, state=state)
    assert named(findings) == []  # running yet: its ranks may still be seen to exit
    findings, _ = watched(hosts, 15, change=lambda t: stopped(t + 30), state=state)
    assert named(findings) == [("dead", Status.FAIL, ("node02",))]
    assert findings[0].message.startswith("node02's launcher failed (exit 1) at ")


# The last lines of a rank gloo aborted when its peer vanished (Paddle 3.3.1, on the rig).
TERMINATED = ("FatalError: `Termination signal` is detected by the operating system.",
              "  [TimeInfo: *** Aborted at 1795725610 (unix time) ***]",
              "  [SignalInfo: *** SIGTERM (@0x4600) received by PID 17800 ***]")


def judged_each(hosts, seconds, change, addresses=None):
    """Each judgement's findings by its time, the hosts' samples fed an interval apart as
    change(t) plants what it plants."""
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    found = {}
    for i in range(int(seconds / POLICY.interval_s) + 1):
        t = i * POLICY.interval_s
        change(t)
        for h in hosts:
            state.add(streams[h.name].feed(h.line(POLICY.interval_s)), received=t)
        found[t] = judge(state, POLICY, t, {}, addresses or {})
    return found


def gone(host, tail=None):
    """The host's rank has exited (its log ending in tail, where given)."""
    r = host.ranks.pop()
    if tail is not None:
        r.tail = tail
    host.gone = [r]


@pytest.mark.parametrize("recorded", [None, "node03", "node01"],
                         ids=["no-launch-record", "its-launcher-first", "a-peer-first"])
def test_a_rank_killed_without_a_word_is_named_as_the_cause_of_its_peers_aborting(recorded):
    hosts = cluster(3)
    state = WatchState(keep=12)
    if recorded:
        state.launch_failure = LaunchFailure(recorded, "exit 247" if recorded == "node03"
                                             else "exit 250", 1.0)

    findings, _ = watched(hosts, 35, change=sigkilled(hosts), state=state)
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    m = findings[0].message
    assert m.startswith("node03 rank 2 (worker) exited at ")
    assert ("without a word in its log: killed by a signal it cannot catch (SIGKILL, as the "
            "OOM killer sends)") in m
    assert ("2 peers failed after it: node01 rank 0 (worker), node02 rank 1 (worker) "
            "(FatalError: `Process abort signal` is detected by the operating system.)") in m
    assert m.endswith("its log ends: step 90 loss 0.1")
    assert ("its launcher's exit 247: a rank killed by SIGKILL" in m) == (recorded == "node03")
    blame = blame_of(findings[0])
    assert blame.cause == "exit" and [r.host for r in blame.ranks] == ["node03"]
    assert blame.error is None  # killed without a word: no error of its own


def all_ended(hosts, killed=None, at=30):
    """A change(t): at `at` every rank ends, the killed host's without a word, the others
    aborted by gloo; a rank whose output is a pipe says nothing that can be read."""
    def end(t):
        if t == at:
            for h in hosts:
                r = h.ranks.pop()
                r.tail = () if r.piped else r.tail if h.name == killed else ABORTED
                h.gone = [r]
    return end


@pytest.mark.parametrize("hook", [False, True], ids=["no-hook", "its-steps-hooked"])
def test_a_rank_whose_output_is_unread_is_not_taken_for_a_second_silent_kill(hook):
    # Seen on the rig: node01's rank writes to a pipe; gloo aborted it with the others when
    # node03's rank was SIGKILLed, and its silence (nothing readable) made it a second cause.
    # A step hook counts its steps but tells nothing of how it ended.
    hosts = cluster(3)
    hosts[0].ranks[0].piped = True
    hosts[0].ranks[0].hook = hook
    findings, _ = watched(hosts, 35, change=all_ended(hosts, killed="node03"))
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    assert "2 peers failed after it: node01 rank 0 (worker), node02 rank 1 (worker) " \
        "(FatalError: `Process abort signal`" in findings[0].message


def test_a_killed_rank_whose_last_sample_shows_no_output_file_is_still_killed_silently():
    # Seen on the rig (1 run of 4): the SIGKILLed rank sampled as it died (a zombie has no
    # open files) showed no output file in its last sample, and was said as "its output
    # going to output the watch may not read". Its log was read as a file until then.
    hosts = cluster(3)
    kill = all_ended(hosts, killed="node03")

    def change(t):
        if t == 25:
            hosts[2].ranks[0].piped = True  # its last sample: no stdout file to be seen
        kill(t)

    findings, _ = watched(hosts, 35, change=change)
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    assert "without a word in its log: killed by a signal it cannot catch" in \
        findings[0].message, findings[0].message


def test_a_rank_that_ended_first_unread_is_named_so_and_never_acted_on():
    hosts = cluster(3)
    hosts[0].ranks[0].piped = True
    findings, _ = watched(hosts, 35, change=all_ended(hosts))
    assert named(findings) == [("dead", Status.FAIL, ("node01",))]
    assert "node01 rank 0 (worker) exited at" in findings[0].message
    assert "first, its output going to pipe:[4026], which the watch cannot read: how it " \
        "ended is not known" in findings[0].message
    assert blame_of(findings[0]).cause == "exit-unread"
    assert recover.culprits(findings) == ({}, [
        "node01: its rank ended first, but what it said is not known (its output unread): "
        "its host or its own code: nothing left out"])


def test_a_victim_seen_dying_before_its_cause_is_named_only_once_the_cause_is_seen():
    # Each host's sampler keeps its own beat: gloo's abort of node01's rank is seen at once,
    # the SIGKILL of node03's (its cause) only at node03's next sample. Meanwhile node01 is
    # not named (with --act it would be left out for its victim's error).
    hosts = cluster(3)

    def kill(t):
        if t == 30:
            gone(hosts[0], ABORTED)
        if t == 35:
            gone(hosts[2])
            gone(hosts[1], ABORTED)

    found = judged_each(hosts, 40, kill)
    assert named(found[30]) == []
    for t in (35, 40):
        assert named(found[t]) == [("dead", Status.FAIL, ("node03",))], found[t]
        assert "2 peers failed after it" in found[t][0].message


@pytest.mark.parametrize("counts, oom", [((0, 1), True), ((2, 2), False), (None, False)],
                         ids=["count-rose", "count-unchanged", "not-read"])
def test_a_rank_the_oom_killer_took_is_named_so_only_where_its_cgroup_counted_it(counts, oom):
    # memory.events' oom_kill (v2; memory.oom_control on v1) as the sampler read it while
    # the rank ran and as it was gone: the real capture's count went from 0 to 1 (tests/
    # fixtures/cgroup2/h200-quota-half-core.json). Its peers that gloo aborted share the
    # count, and are named for their own errors as before.
    hosts = cluster(3)

    findings, _ = watched(hosts, 35, change=sigkilled(hosts, oom=counts))
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    m = findings[0].message
    said = "the kernel's OOM killer killed it: its memory cgroup's oom_kill count went from 0 to 1"
    assert (said in m) == oom, m
    assert ("killed by a signal it cannot catch" in m) == (not oom), m
    assert "2 peers failed after it" in m


def test_the_peers_a_loss_ended_are_listed_in_rank_order_not_in_the_order_they_ended():
    hosts = cluster(3)

    def kill(t):
        if t == 30:  # SIGKILL on node03; node02 aborts at once, node01 a sample later
            for h in hosts[1:]:
                r = h.ranks.pop()
                if h.name == "node02":
                    r.tail = ABORTED
                h.gone = [r]
        if t == 35:
            r = hosts[0].ranks.pop()
            r.tail = ABORTED
            hosts[0].gone = [r]

    findings, _ = watched(hosts, 40, change=kill)
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    assert "2 peers failed after it: node01 rank 0 (worker), node02 rank 1 (worker) (" in \
        findings[0].message


def test_a_rank_that_raised_is_named_and_not_the_peers_the_launch_then_stopped():
    hosts = cluster(3)

    def crash(t):
        if t == 30:
            r = hosts[0].ranks.pop()
            r.tail = ("step 80 loss 0.1", "Traceback (most recent call last):",
                      "RuntimeError: CUDA out of memory")
            hosts[0].gone = [r]
        if t == 35:  # TERM from the launch: Paddle says so in their logs
            for h in hosts[1:]:
                r = h.ranks.pop()
                r.tail = TERMINATED
                h.gone = [r]

    findings, _ = watched(hosts, 40, change=crash)
    assert named(findings) == [("dead", Status.FAIL, ("node01",))]
    assert findings[0].message.endswith(
        "with an error: RuntimeError: CUDA out of memory; 2 peers failed after it: node02 "
        "rank 1 (worker), node03 rank 2 (worker) (FatalError: `Termination signal` is "
        "detected by the operating system.)")
    # Its error is the blame's, as --act reads it: a CUDA OOM is the host's to leave out, a
    # ValueError of the script's would not be.
    assert blame_of(findings[0]).error == "RuntimeError: CUDA out of memory"
    assert list(recover.culprits(findings)[0]) == ["node01"]


def test_ranks_that_finished_well_before_a_peer_was_stopped_are_not_its_cause():
    hosts = cluster(3)

    def end(t):
        if t == 30:  # two ranks finish; the third hangs in its teardown
            for h in hosts[:2]:
                h.gone = [h.ranks.pop()]
            hosts[2].ranks[0].steps_per_s = 0.0
        if t == 60:  # until someone stops it
            r = hosts[2].ranks.pop()
            r.tail = TERMINATED
            hosts[2].gone = [r]

    findings, _ = watched(hosts, 65, change=end)
    assert [(f.check, f.hosts) for f in findings if "SIGKILL" in f.message] == []
    assert ("dead", Status.FAIL, ("node03",)) in named(findings)
    assert next(f for f in findings if f.hosts == ("node03",)).message.endswith(
        "with an error: FatalError: `Termination signal` is detected by the operating system.")


@pytest.mark.parametrize("apart", [0, 5], ids=["same-sample", "a-sample-apart"])
def test_a_job_stopped_as_a_whole_blames_nobody(apart):
    hosts = cluster(3)

    def stop(t):  # Ctrl-C of the launch, or scancel: every rank TERMed within seconds
        for i, h in enumerate(hosts):
            if t == 30 + (apart if i == 2 else 0):
                r = h.ranks.pop()
                r.tail = TERMINATED if i != 1 else ("step 90 loss 0.1",)  # KILLed after
                h.gone = [r]

    every: list[Any] = []
    findings, state = watched(hosts, 30, change=stop, every=every)
    assert not [f for f in findings if f.check == "dead"]  # not while it stops, either
    findings, _ = watched(hosts, 15, change=lambda t: stop(t + 35), state=state, every=every)
    nobody_named(every)  # the stop is the job's, said with no cause: nobody blamed, ever
    assert named(findings) == [("ended", Status.WARN, ("node01", "node02", "node03"))]
    assert "was stopped as a whole: its 3 ranks ended by a signal to stop" in \
        findings[0].message
    assert "no rank or host to blame" in findings[0].message


def test_a_rank_killed_after_its_term_is_the_job_stopped_as_a_whole_at_a_short_interval():
    # Every 2 s: rank 0 did not end on the stop's TERM (its host's stop ran late, or it held
    # the signal) and was KILLed 5 s after its peers ended by theirs: seen 6 s after them.
    policy = replace(POLICY, interval_s=2.0, persist_s=6.0)
    hosts = cluster(3)

    def stop(t):
        for i, h in enumerate(hosts):
            if t == (36 if i == 0 else 30):
                r = h.ranks.pop()
                r.tail = TERMINATED if i else ("step 90 loss 0.1",)  # KILLed: no word
                h.gone = [r]

    every: list[Any] = []
    findings, _ = watched(hosts, 44, policy, change=stop, every=every)
    nobody_named(every)  # the peers were not taken for dead while rank 0 was still ending
    assert named(findings) == [("ended", Status.WARN, ("node01", "node02", "node03"))]


def test_the_stop_window_covers_the_launchs_kill_after_its_term():
    assert KILL_AFTER_TERM_S >= STOP_WAIT_S


def test_a_rank_termed_alone_while_its_peers_run_on_is_dead():
    hosts = cluster(3)

    def term(t):
        if t == 30:
            gone(hosts[1], TERMINATED)

    findings, state = watched(hosts, 30, change=term)
    assert named(findings) == []  # a stop of the whole job would end the others by now
    findings, _ = watched(hosts, 15, change=lambda t: None, state=state)
    assert named(findings) == [("dead", Status.FAIL, ("node02",))]
    assert findings[0].message.endswith("with an error: FatalError: `Termination signal` is "
                                        "detected by the operating system.")


def test_a_ps_trainer_may_end_alone_but_a_server_may_not():
    hosts = ps_job(trainers=3, servers=1)

    def end(t):
        if t == 20:
            hosts[0].gone = [hosts[0].ranks.pop()]  # a trainer that ran out of data
        if t == 25:
            hosts[3].gone = [hosts[3].ranks.pop()]  # the server, while trainers train

    findings, _ = watched(hosts, 40, change=end)
    assert named(findings) == [("dead", Status.FAIL, ("ps1",))]


def test_an_async_trainer_slower_than_its_peers_is_named_as_slowing_only_itself():
    hosts = [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + i, i, role="TRAINER")],
                      argv=("python3", "-m", "paddle.distributed.launch", "--servers",
                            "10.0.0.9:6070", "train.py"), netns=f"net:[{i}]")
             for i in range(4)]
    hosts[1].ranks[0].steps_per_s = 4.0
    findings, _ = watched(hosts, 40)
    assert named(findings) == [("straggler", Status.WARN, ("node02",))]
    assert findings[0].message.startswith("node02 rank 1 (trainer) steps at 0.40 of its peers'")
    assert "in async mode it slows only itself" in findings[0].message


def test_the_hook_is_the_progress_when_the_ranks_call_it():
    hosts = cluster(hook=True)
    findings, state = watched(hosts, 30)
    assert list(state.jobs.values())[0].unit() == "hook"
    assert "10 steps/s a rank" in findings[0].message


def test_a_launcher_in_another_watched_hosts_namespace_is_that_hosts_not_this_ones():
    # Simulated hosts share one kernel: node01's sampler sees node02's launcher too.
    a, b = cluster(2)
    seen_from_a = {"pid": (b.launcher or 0) + 1, "state": "S", "argv": list(b.argv),
                   "log_dir": "log", "netns": b.netns,
                   "ranks": [{"pid": 4242, "state": "S", "cpu_s": 1.0}]}
    a.extra = [seen_from_a]
    findings, state = watched([a, b], 30)
    (job,) = state.jobs.values()
    assert sorted(job.launchers) == [("node01", 100), ("node02", 100)]
    # ... and its ranks, seen from node01 before node02 first sampled, are dropped with it.
    assert sorted((r.host, r.launcher) for r in job.ranks) == [("node01", 100), ("node02", 100)]
    # A launcher in a namespace of no watched host (a container's) is this host's.
    seen_from_a["netns"], seen_from_a["pid"] = "net:[77]", 555
    c, d = cluster(2)
    c.extra = [seen_from_a]
    _, state = watched([c, d], 10)
    assert ("node01", 555) in state.jobs["master 10.0.0.1:6767"].launchers


def test_no_launcher_on_any_host_cannot_be_checked():
    hosts = cluster(2)
    for h in hosts:
        h.ranks = []
        h.argv = ()
    state = WatchState(keep=12)
    for h in hosts:
        stream = HostStream(h.name)
        line = h.line()
        state.add(stream.feed(line.replace('"jobs": [{', '"x": [{')), received=0.0)
    findings = judge(state, POLICY, 0.0, {})
    assert [(f.check, f.status) for f in findings] == [("watch", Status.COULD_NOT_CHECK)]
    assert "no Paddle job runs on node[01-02]" in findings[0].message


def test_a_host_whose_samples_stop_cannot_be_checked():
    hosts = cluster(2)
    _, state = watched(hosts, 10)
    findings = judge(state, POLICY, 10.0 + 3 * POLICY.interval_s + 1, {})  # the last at 10 s
    stale = [f for f in findings if f.check == "watch"]
    assert [f.hosts for f in stale] == [("node01",), ("node02",)]
    assert "no sample from node01 for 16 s" in stale[0].message


def test_a_host_whose_samples_come_ever_later_cannot_be_checked_and_blames_nobody():
    # node02's connection backs up from 60 s: its samples still come, each 2.5 s later than
    # the one before, taken ever longer before they arrive; it cannot be judged once they are
    # older than a silence would be, and neither its ranks nor its peers are blamed for it.
    hosts = cluster(3)
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    said = []
    for i in range(41):
        t = 5.0 * i
        for h in hosts:
            delay = max(0.0, (t - 60) / 2) if h.name == "node02" else 0.0
            state.add(streams[h.name].feed(h.line(POLICY.interval_s)), received=t + delay)
        said.append((t, judge(state, POLICY, t + 0.5, {})))
    late = [(t, f) for t, found in said for f in found if f.check == "watch"]
    assert late and {f.hosts for _, f in late} == {("node02",)}
    first_t, first = late[0]
    assert 85 <= first_t <= 100, first_t  # once 15 s late: a silence's bar (3 intervals)
    assert first.message.startswith("the samples from node02 arrive "), first.message
    assert "s after they were taken, later than its recent ones did (its connection backs " \
        "up, or its clock was stepped back): could not judge node02 rank 1 (worker)" \
        in first.message, first.message
    nobody_named([found for _, found in said])


def test_a_silence_of_a_second_or_two_is_not_a_stuck_sampler_however_short_the_interval():
    # A loaded host or a busy SSH channel delays a line: at a 0.5 s interval, 2 s without
    # one (four intervals) is still a host that answers; past the floor it is not.
    fast = replace(POLICY, interval_s=0.5, persist_s=2.0)
    _, state = watched(cluster(2), 4, fast)
    last = max(state.last_tick.values())
    assert not [f for f in judge(state, fast, last + 2.0, {}) if f.check == "watch"]
    assert STALE_FLOOR_S > 4 * fast.interval_s
    quiet = [f for f in judge(state, fast, last + STALE_FLOOR_S + 0.5, {})
             if f.check == "watch"]
    assert [f.hosts for f in quiet] == [("node01",), ("node02",)]


def ps_job(trainers: int = 3, servers: int = 2) -> list[FakeHost]:
    argv = ("python3", "-m", "paddle.distributed.launch", "--servers", "10.0.0.8:6070",
            "train.py")
    hosts = [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + i, i, role="TRAINER")], argv=argv,
                      netns=f"net:[{i}]") for i in range(trainers)]
    hosts += [FakeHost(f"ps{i + 1}", [FakeRank(2000 + i, i, role="PSERVER", steps_per_s=0.0,
                                               quota=2.0)], argv=argv, netns=f"net:[9{i}]")
              for i in range(servers)]
    return hosts


def test_a_throttled_server_that_slows_every_trainer_alike_is_named_not_the_trainers():
    hosts = ps_job()

    def starve(t):
        if t == 20:
            for h in hosts[:3]:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 4.0, 0.1
            s = hosts[4].ranks[0]
            s.quota, s.throttled_share, s.busy, s.wait = 0.25, 0.8, 0.3, 0.1

    findings, _ = watched(hosts, 50, change=starve,
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    assert named(findings) == [("straggler", Status.FAIL, ("ps2",))]
    msg = findings[0].message
    assert msg.startswith("ps2 server 1 (server) holds every trainer: the 3 trainers step at "
                          "0.40-0.40 of their pace at the start")
    assert "its cgroup's CPU quota throttles it" in msg


def test_trainers_slowing_alike_with_no_server_saturated_name_no_server():
    hosts = ps_job()

    def slow(t):
        if t == 20:
            for h in hosts[:3]:
                h.ranks[0].steps_per_s = 4.0

    findings, _ = watched(hosts, 50, change=slow)
    assert [f for f in named(findings) if f[2][0].startswith("ps")] == []


@pytest.mark.parametrize("more", [False, True], ids=["as-from-its-start", "waits-more-now"])
def test_a_server_short_of_cpu_from_its_start_holds_no_trainer_until_it_waits_more(more):
    # ps2 shares its cores from the start: it waits for a CPU 0.4 s a second all along. The
    # trainers slow for another reason; it is named only where its own wait grew with them.
    hosts = ps_job()
    s = hosts[4].ranks[0]
    s.busy, s.wait = 0.8, 0.4

    def slow(t):
        if t == 20:
            for h in hosts[:3]:
                h.ranks[0].steps_per_s = 4.0
            if more:
                s.busy, s.wait = 1.2, 0.8

    findings, _ = watched(hosts, 50, change=slow)
    held = [f for f in findings if f.status is Status.FAIL and "holds every trainer" in f.message]
    assert [f.hosts for f in held] == ([("ps2",)] if more else [])


ADDRESSES = {f"10.0.0.{i + 1}": f"node{i + 1:02d}" for i in range(4)}


def test_the_host_in_every_pair_with_a_full_send_queue_is_the_slow_link_both_ways():
    hosts = cluster(3)

    def throttle(t):
        if t == 10:  # node02's link slowed both ways: what it sends and what it is sent
            hosts[0].ranks[0].sendq = {"10.0.0.2": 200 << 10}
            hosts[1].ranks[0].sendq = {"10.0.0.3": 150 << 10, "10.0.0.1": 1 << 10}
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 1.0, 0.05

    findings, _ = watched(hosts, 40, change=throttle, addresses=ADDRESSES,
                          at_check={"node02": AtCheck(link_bps=941e6)})
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]
    msg = findings[0].message
    assert msg.startswith("node02's link holds the job: data to or from it waits in full send "
                          "queues (node01->node02 200 KiB, node02->node03 150 KiB) for 15 s")
    assert "its NIC carries" in msg and "(941 Mbit/s at the check)" in msg
    # Blamed as a link, typed: the pairs, no rank; as the log keeps it.
    blame = blame_of(findings[0])
    assert blame.cause == "link" and blame.ranks == ()
    assert sorted(blame.pairs) == [("node01", "node02"), ("node02", "node03")]
    doc = finding_doc(findings[0])
    assert doc["cause"] == "link" and sorted(doc["pairs"]) == [["node01", "node02"],
                                                                ["node02", "node03"]]


@pytest.mark.parametrize("resent", [0.0, 0.015, 0.4], ids=["none", "some", "many"])
def test_one_full_pair_is_said_as_the_link_between_its_ends_whatever_its_sender_resends(
        resent):
    # Seen on the rig: a link shaped both ways queues at its shaper (no resends: "they wait
    # on its own link" blamed its healthy peer) and loses the sender's ACKs on their way in
    # (41% resent: "lost on the way to" blamed the healthy receiver). Neither tells an end.
    hosts = cluster(3)

    def slow_pair(t):
        if t == 20:  # after the job's early pace: its queue fills and the job slows with it
            hosts[1].ranks[0].sendq = {"10.0.0.3": 300 << 10}
            hosts[1].resent_share = resent
            for h in hosts:
                h.ranks[0].steps_per_s = 3.0

    findings, _ = watched(hosts, 50, change=slow_pair, addresses=ADDRESSES)
    assert named(findings) == [("straggler", Status.FAIL, ("node02", "node03"))]
    assert findings[0].message == (
        "the link from node02 to node03 holds the job: data waits in full send queues "
        f"(node02->node03 300 KiB) for 15 s (node02 resends {resent:.1%}); either end's "
        "link, or the switch between them")


def test_a_link_full_both_ways_between_two_hosts_is_said_as_that_link():
    hosts = cluster(3)

    def both_ways(t):
        if t == 20:
            hosts[1].ranks[0].sendq = {"10.0.0.3": 300 << 10}
            hosts[2].ranks[0].sendq = {"10.0.0.2": 200 << 10}
            for h in hosts:
                h.ranks[0].steps_per_s = 3.0

    findings, _ = watched(hosts, 50, change=both_ways, addresses=ADDRESSES)
    assert named(findings) == [("straggler", Status.FAIL, ("node02", "node03"))]
    assert findings[0].message.startswith(
        "the link between node02 and node03 (both ways) holds the job: data waits in full "
        "send queues (node02->node03 300 KiB, node03->node02 200 KiB) for 15 s")


def _slow_both_ways(hosts, then):
    """node02's link slowed both ways at 20 s (the job slows with it): both its pairs full,
    then from 45 s on the pairs `then(t)` gives (which of them stay full changes)."""
    def change(t):
        if t == 20:
            for h in hosts:
                h.ranks[0].steps_per_s = 2.0
        if t >= 20:
            pairs = then(t) if t >= 45 else {("node01", "10.0.0.2"), ("node02", "10.0.0.3")}
            for h in hosts:
                h.ranks[0].sendq = {dst: 150 << 10 for src, dst in pairs if src == h.name}
            hosts[1].resent_share = 0.4  # its ACKs lost on the way in: it resends
            hosts[0].resent_share = 0.0  # its data waits at node02's shaper: no resends
    return change


@pytest.mark.parametrize("pair", [("node01", "10.0.0.2"), ("node02", "10.0.0.3")],
                         ids=["its-peer-sends-to-it", "it-sends-to-its-peer"])
def test_a_host_named_for_its_link_stays_the_cause_while_one_of_its_pairs_stays_full(pair):
    # Seen on the rig (5 Mbit/s both ways on one host, 5 minutes): whenever one of its two
    # pairs drained for a window, the other's far end was failed alone, four times.
    hosts = cluster(3)
    found = judged_each(hosts, 90, _slow_both_ways(hosts, lambda t: {pair}), ADDRESSES)
    fails = {t: named(f) for t, f in found.items() if named(f)}
    assert fails and all(n == [("straggler", Status.FAIL, ("node02",))] for n in fails.values()), \
        fails
    first = min(fails)
    assert all(t in fails for t in found if t >= first)  # never cleared while it holds
    last = next(f for f in found[90] if f.status is Status.FAIL)
    assert last.message.startswith("node02's link holds the job: data to or from it waits in "
                                   "full send queues (")
    assert "; in every full queue since " in last.message


def test_the_end_of_a_full_pair_whose_sampler_went_quiet_is_the_slow_link():
    # Seen on the rig (node02's cable pulled): node01's queue to node02 stayed full while
    # node02's sampler, whose connection crosses the same link, fell silent; the pair was
    # said with both ends, node01 among them. A silent end is evidence about that end.
    hosts = cluster(3)
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    for i in range(11):  # 5 s a sample; the cable pulled at 20 s
        if i == 4:
            for h in hosts:
                h.ranks[0].steps_per_s = 0.5
            hosts[0].ranks[0].sendq = {"10.0.0.2": 200 << 10}
        for h in hosts:
            line = h.line(POLICY.interval_s)
            if h.name != "node02" or i < 5:
                state.add(streams[h.name].feed(line), received=5.0 * i)
    findings = judge(state, POLICY, 50.0, {}, ADDRESSES)
    assert named(findings) == [("watch", Status.COULD_NOT_CHECK, ("node02",)),
                               ("straggler", Status.FAIL, ("node02",))], named(findings)
    msg = findings[1].message
    assert msg.startswith("node02's link holds the job: data to or from it waits in full send "
                          "queues (node01->node02 200 KiB) for 15 s; its sampler's connection, "
                          "on the same link, has had no sample for 30 s"), msg
    assert "its NIC carries" not in msg  # its figures are as old as its last sample


def test_a_named_link_is_forgotten_once_a_full_pair_has_other_ends():
    # The full pairs moved off node02: it no longer explains them, and the one pair left is
    # said as the link between its ends, as if nothing had been named before.
    hosts = cluster(3)
    found = judged_each(hosts, 90, _slow_both_ways(hosts, lambda t: {("node01", "10.0.0.3")}),
                        ADDRESSES)
    assert named(found[40]) == [("straggler", Status.FAIL, ("node02",))]
    assert named(found[90]) == [("straggler", Status.FAIL, ("node01", "node03"))]
    assert "node02" not in {h for t in range(60, 95, 5) for f in found[t] if blames(f)
                            for h in f.hosts}


def test_a_window_with_no_full_queue_while_the_job_still_crawls_is_no_pass():
    # A job at a hundredth of its pace sends little: its queues may drain for a window. That
    # window is not judged (no pass line), and nobody new is named.
    hosts = cluster(3)
    found = judged_each(hosts, 90, _slow_both_ways(hosts, lambda t: set() if t < 70 else
                                                   {("node02", "10.0.0.3")}), ADDRESSES)
    assert named(found[40]) == [("straggler", Status.FAIL, ("node02",))]
    (quiet,) = named(found[65])
    assert quiet == ("straggler", Status.COULD_NOT_CHECK, ("node02",))
    assert not any(f.check == "progress" and f.status is Status.PASS for f in found[65])
    msg = next(f.message for f in found[65] if f.check == "straggler")
    assert msg.startswith("the job still steps at 0.") and "x its early pace; node02's link "\
        "held it (in every full send queue since " in msg, msg
    assert named(found[90]) == [("straggler", Status.FAIL, ("node02",))]


def test_a_named_link_is_forgotten_once_the_job_keeps_its_pace_again():
    hosts = cluster(3)
    slow = _slow_both_ways(hosts, lambda t: {("node02", "10.0.0.3")})

    def change(t):
        slow(t)
        if t == 60:  # the link mended: the pace is back, a queue stays full
            for h in hosts:
                h.ranks[0].steps_per_s = 10.0

    found = judged_each(hosts, 110, change, ADDRESSES)
    assert named(found[40]) == [("straggler", Status.FAIL, ("node02",))]
    assert named(found[110]) == []
    assert [f.check for f in found[110] if f.check == "network"] == ["network"]


@pytest.mark.parametrize("when", [0, 20], ids=["from-the-start", "later"])
def test_full_send_queues_while_the_job_keeps_its_pace_name_no_link(when):
    # Seen on the rig: a healthy job's own all-reduce kept node03's queues full while every
    # rank stepped at its pace, and node03's link was blamed. A job that uses its network
    # well looks like this all the time; its link holds nothing until its pace falls.
    hosts = cluster(3)

    def busy(t):
        if t == when:
            hosts[0].ranks[0].sendq = {"10.0.0.3": 200 << 10}
            hosts[1].ranks[0].sendq = {"10.0.0.3": 150 << 10}
            hosts[2].ranks[0].sendq = {"10.0.0.1": 120 << 10}

    every: list[Any] = []
    findings, _ = watched(hosts, 60, change=busy, addresses=ADDRESSES, every=every)
    nobody_named(every)
    # Said once, as what it is, with the figures; the pass line beside it.
    (net,) = [f for f in findings if f.check == "network"]
    assert net.status is Status.PASS and net.hosts == ("node01", "node02", "node03")
    assert net.message.startswith("the job keeps its early pace with full send queues "
                                  "(node01->node03 200 KiB, node02->node03 150 KiB, "
                                  "node03->node01 120 KiB) for 15 s: it is network-bound")
    assert any(f.check == "progress" and f.status is Status.PASS for f in findings)


def test_a_network_bound_job_is_said_once_whichever_of_its_links_are_full_now():
    # On the rig, a healthy job's queues filled on one pair, then another: the line was said
    # anew each time its pairs changed (43 times in 10 minutes). It is the job's, said once.
    hosts = cluster(3)

    def busy(t):
        hosts[0].ranks[0].sendq = {"10.0.0.3": 200 << 10} if t < 40 else {}
        hosts[1].ranks[0].sendq = {} if t < 40 else {"10.0.0.1": 150 << 10}

    found = judged_each(hosts, 80, busy, ADDRESSES)
    nobody_named(list(found.values()))
    net = [next(f for f in found[t] if f.check == "network") for t in (35, 80)]
    assert [f.hosts for f in net] == [("node01", "node02", "node03")] * 2
    assert "node01->node03" in net[0].message and "node02->node01" in net[1].message


@pytest.mark.parametrize("peers_run_on,is_dead", [(False, False), (True, True)],
                         ids=["the-job-ends", "its-peers-run-on"])
def test_a_zombie_rank_has_exited_and_is_dead_only_where_its_peers_run_on(peers_run_on,
                                                                           is_dead):
    hosts = cluster(3)

    def end(t):
        if t == 25:
            hosts[0].ranks[0].state = "Z"
        if t == 30 and not peers_run_on:
            for h in hosts[1:]:
                h.ranks[0].state = "Z"

    findings, _ = watched(hosts, 40, change=end)
    assert named(findings) == ([("dead", Status.FAIL, ("node01",))] if is_dead else [])
    if not is_dead:
        assert [f.check for f in findings] == ["ended"]
        assert findings[0].message.startswith("3 ranks of master 10.0.0.1:6767 ended by ")
        assert " by 00:00:00" not in findings[0].message


def test_a_full_queue_that_dips_now_and_then_is_still_full():
    hosts = cluster(3)

    def throttle(t):
        if t >= 20:  # full, but empty in one sample of the window; the job slows with it
            hosts[0].ranks[0].sendq = {} if t == 40 else {"10.0.0.2": 100 << 10}
            hosts[1].ranks[0].sendq = {"10.0.0.3": 90 << 10}
            for h in hosts:
                h.ranks[0].steps_per_s = 3.0

    findings, _ = watched(hosts, 50, change=throttle, addresses=ADDRESSES)
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]


def test_a_send_queue_full_only_now_and_then_names_nobody():
    hosts = cluster(3)

    def burst(t):
        hosts[0].ranks[0].sendq = {"10.0.0.2": 200 << 10} if t % 10 == 0 else {}

    every: list[Any] = []
    watched(hosts, 40, change=burst, addresses=ADDRESSES, every=every)
    nobody_named(every)


def test_a_starved_host_whose_peers_queue_data_for_it_is_named_once_for_its_cpu():
    hosts = cluster(3)

    def starve(t):
        if t == 10:
            for h in hosts:
                h.ranks[0].busy = 0.1
            r = hosts[1].ranks[0]
            r.busy, r.wait, r.quota, r.throttled_share = 0.7, 0.6, 0.25, 0.9
            hosts[0].ranks[0].sendq = {"10.0.0.2": 200 << 10}

    findings, _ = watched(hosts, 40, change=starve, addresses=ADDRESSES)
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]
    assert "quota" in findings[0].message


@pytest.mark.parametrize("queued", [False, True], ids=["trainers-step-on", "queues-full"])
def test_a_starved_server_is_named_alone_and_its_trainers_full_queues_are_not_the_link(
        queued):
    # Async PS: the trainers step on at their pace while the server, throttled by a quota,
    # falls behind (a warning); where their send queues to it stay full it holds them.
    hosts = ps_job(trainers=2, servers=1)
    addresses = {"10.0.0.1": "node01", "10.0.0.2": "node02", "10.0.0.8": "ps1"}

    def starve(t):
        if t == 20:
            for h in hosts[:2]:
                h.ranks[0].sendq = {"10.0.0.8": 60 << 10} if queued else {}
            s = hosts[2].ranks[0]
            s.quota, s.throttled_share, s.busy, s.wait = 0.05, 1.0, 1.5, 1.4

    findings, _ = watched(hosts, 50, change=starve, addresses=addresses,
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    status = Status.FAIL if queued else Status.WARN
    assert named(findings) == [("straggler", status, ("ps1",))]
    msg = findings[0].message
    assert msg.startswith("ps1 server 0 (server) is short of CPU for 15 s: its cgroup's CPU "
                          "quota throttles it")
    assert "(0.05 of 2 cores now: a cgroup quota set since; 2 at the check)" in msg
    assert msg.endswith("; its trainers' data to it waits in full send queues (node01->ps1 "
                        "60 KiB, node02->ps1 60 KiB)" if queued else
                        "; its trainers step on at their own pace, their updates reaching "
                        "it late")


@pytest.mark.parametrize("later", [False, True], ids=["as-from-its-start", "starved-since"])
def test_a_server_on_a_cpu_limit_from_its_start_is_the_jobs_shape_until_it_is_starved_more(
        later):
    # ps1 throttled by its limit in 30 % of its periods from its first sample (its trainers'
    # pace learned with it so): nobody named at any judgement. A quota cut mid-run that
    # throttles it in every period is still named.
    hosts = ps_job(trainers=2, servers=1)
    s = hosts[2].ranks[0]
    s.quota, s.throttled_share, s.busy, s.wait = 0.5, 0.3, 0.5, 0.1

    def starve(t):
        if later and t == 60:
            s.quota, s.throttled_share, s.busy, s.wait = 0.05, 1.0, 1.5, 1.4
    judgements: list[Any] = []
    findings, _ = watched(hosts, 100, change=starve, every=judgements,
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    if later:
        assert named(findings) == [("straggler", Status.WARN, ("ps1",))]
        nobody_named(judgements[:int(60 / POLICY.interval_s)])
    else:
        nobody_named(judgements)


def test_full_queues_to_a_server_with_cpu_to_spare_are_the_links():
    hosts = ps_job(trainers=2, servers=1)
    addresses = {"10.0.0.1": "node01", "10.0.0.2": "node02", "10.0.0.8": "ps1"}

    def slow(t):
        if t == 20:  # the trainers' data to the server waits, and they slow with it
            for h in hosts[:2]:
                h.ranks[0].sendq = {"10.0.0.8": 60 << 10}
                h.ranks[0].steps_per_s = 3.0

    findings, _ = watched(hosts, 50, change=slow, addresses=addresses)
    assert named(findings) == [("straggler", Status.FAIL, ("ps1",))]
    assert findings[0].message.startswith("ps1's link holds the job")


def test_a_collective_workers_full_queue_and_cpu_wait_are_no_starvation():
    # Seen on a healthy rig: node02 waits for a CPU half a second a second (its peers do
    # too, on shared cores) while a gradient all-reduce keeps node03's queue to it full.
    hosts = cluster(3)
    for h in hosts:
        h.ranks[0].busy, h.ranks[0].wait = 0.6, 0.5
    hosts[2].ranks[0].sendq = {"10.0.0.2": 80 << 10}
    findings, _ = watched(hosts, 20, addresses=ADDRESSES)
    assert not [f for f in findings if "short of CPU" in f.message], findings


def test_the_pass_line_says_what_was_compared_for_each_kind_of_job():
    findings, _ = watched(cluster(), 40)
    [line] = [f.message for f in findings if f.check == "progress"]
    assert "none stopped; none busy while its peers wait for it; the job at 1.00 x its " \
        "early pace" in line, line
    assert "peers' median" not in line  # no such comparison is made for a collective job
    findings, _ = watched(ps_job(), 40)
    [line] = [f.message for f in findings if f.check == "progress"]
    assert "no trainer below 0.75 x its peers' median pace, no server short of CPU" in line


def test_progress_that_cannot_be_read_is_said_per_host_with_its_fix_never_passed():
    hosts = cluster()
    hosts[2].ranks[0].piped = True  # its stdout a pipe, no hook: nothing to count
    findings, _ = watched(hosts, 40)
    assert named(findings) == [("progress", Status.WARN, ("node03",))]
    said = findings[0].message
    assert said.startswith("could not check progress on node03: node03 rank 2 (worker) "
                           "writes to pipe:[4026], not a file")
    assert "call preflight.watch.step() once a step" in said
    assert not [f for f in findings if f.status is Status.PASS]


def test_a_host_whose_samples_stop_leaves_every_rule_and_its_ranks_are_not_judged():
    # node03's sampler goes quiet (its connection dropped, the node hung) while the job
    # freezes: its last figures (busy while the others wait) are not evidence of a
    # straggler; the hang is found on the hosts that answer.
    hosts = cluster(3)
    quiet: list[FakeHost] = []

    def freeze(t):
        if t == 20:
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 0.0, 0.02
            hosts[2].ranks[0].busy = 0.9
            quiet.append(hosts.pop(2))

    findings, _ = watched(hosts, 100, change=freeze)
    assert ("watch", Status.COULD_NOT_CHECK, ("node03",)) in named(findings)
    [stale] = [f for f in findings if f.check == "watch"]
    assert "could not judge node03 rank 2 (worker)" in stale.message
    assert not [f for f in findings if f.check in ("straggler", "dead", "stopped")]
    [hang] = [f for f in findings if f.check == "hang"]
    assert hang.message.startswith("no progress on any of 2 ranks") and blame_of(hang).ranks == ()


def test_a_job_whose_every_host_went_quiet_is_never_said_to_have_ended_well():
    hosts = cluster(2)
    _, state = watched(hosts, 20)
    findings = judge(state, POLICY, 20.0 + 4 * POLICY.interval_s, {})
    assert sorted(f.check for f in findings) == ["watch", "watch"]
    assert not [f for f in findings if f.status is Status.PASS]


def test_a_rank_busier_from_the_start_is_the_jobs_shape_not_a_straggler():
    # Rank 0 also evaluates and logs: busier than its peers from the first sample, for good.
    hosts = cluster()
    hosts[0].ranks[0].busy = 0.9
    every: list[Any] = []
    findings, _ = watched(hosts, 60, every=every)
    nobody_named(every)
    shape = [f for f in findings if f.check == "shape"]
    assert [(f.status, f.hosts) for f in shape] == [(Status.PASS, ("node01",))]
    assert "as it was from the start (0.90, they 0.40): the job's shape" in shape[0].message
    assert any(f.check == "progress" and f.status is Status.PASS for f in findings)


@pytest.mark.parametrize("fault", ["waits", "throttled"])
def test_a_rank_busier_from_the_start_is_named_once_it_changes(fault):
    hosts = cluster()
    r0 = hosts[0].ranks[0]
    r0.busy, r0.quota = 0.9, 2.0

    def change(t):
        if t == 30:  # its peers begin to wait for it
            for h in hosts[1:]:
                h.ranks[0].busy = 0.16
            if fault == "waits":  # other work on its host: it waits for a CPU
                r0.busy, r0.wait = 1.0, 0.5
            else:  # a quota set since
                r0.quota, r0.throttled_share = 0.5, 0.9

    findings, _ = watched(hosts, 60, change=change)
    assert named(findings) == [("straggler", Status.FAIL, ("node01",))]
    assert not [f for f in findings if f.check == "shape"]


def test_a_rank_busier_from_the_start_getting_busier_still_with_no_cause_is_a_phase():
    # Busier than from its start, with nothing on its host holding it: more of the job's own
    # work (a longer evaluation), said as a phase, not the job's shape and not a straggler.
    hosts = cluster()
    r0 = hosts[0].ranks[0]
    r0.busy, r0.quota = 0.9, 2.0

    def change(t):
        if t == 30:
            for h in hosts[1:]:
                h.ranks[0].busy = 0.16
            r0.busy = 1.4

    every: list[Any] = []
    findings, _ = watched(hosts, 60, change=change, every=every)
    nobody_named(every)
    assert [(f.check, f.hosts) for f in findings if f.check in ("phase", "shape")] == \
        [("phase", ("node01",))]


def test_a_fault_planted_inside_the_first_window_is_no_shape():
    # node02's rank gets busy 5 s into the watch: one half of its first window shows it
    # as its peers, so it is judged on its peers alone, and named.
    hosts = cluster()

    def early(t):
        if t == 10:
            for h in hosts:
                h.ranks[0].busy = 0.16
            hosts[1].ranks[0].busy, hosts[1].ranks[0].wait = 0.9, 0.5

    findings, _ = watched(hosts, 40, change=early)
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]


@pytest.mark.parametrize("before", ["waits", "throttled"])
def test_a_rank_starved_before_the_watch_came_is_named_not_taken_for_shape(before):
    # Busier than its peers from the first sample, but waiting for a CPU, or throttled by
    # a quota: a fault that was there before the watch, not the job's design.
    hosts = cluster()
    for h in hosts:
        h.ranks[0].busy = 0.16
    r = hosts[2].ranks[0]
    if before == "waits":
        r.busy, r.wait = 0.8, 0.6
    else:
        r.busy, r.quota, r.throttled_share = 0.73, 0.25, 0.9
    findings, _ = watched(hosts, 60)
    assert named(findings) == [("straggler", Status.FAIL, ("node03",))]
    assert not [f for f in findings if f.check == "shape"]


@pytest.mark.parametrize("skew", [8.0, -8.0], ids=["ahead", "behind"])
def test_a_rank_killed_on_a_host_whose_clock_is_off_is_still_the_cause(skew):
    # node03's clock is 8 s off the others': its rank's death, by its own clock, falls
    # outside the seconds its peers' aborts fall in. On the controller's clock (each host's
    # offset measured from its first samples as they arrive) it comes first, as it did.
    hosts = cluster(3)
    hosts[2].t += skew

    findings, state = watched(hosts, 35, change=sigkilled(hosts))
    assert named(findings) == [("dead", Status.FAIL, ("node03",))]
    assert "2 peers failed after it" in findings[0].message
    offset = state.clocks.offset
    assert offset["node03"] - offset["node01"] == pytest.approx(skew)


def test_a_death_is_said_at_the_controllers_time_whichever_way_its_hosts_clock_is_off():
    # The same kill on node03 whose clock is 8 s ahead, then 8 s behind: 16 s apart by its
    # own clock, the same second on the controller's, which is the time the message says.
    said = []
    for skew in (8.0, -8.0):
        hosts = cluster(3)
        hosts[2].t += skew
        findings, _ = watched(hosts, 35, change=sigkilled(hosts))
        [dead] = [f for f in findings if f.check == "dead"]
        m = re.search(r"exited at (\d\d:\d\d:\d\d) ", dead.message)
        assert m is not None, dead.message
        said.append(m[1])
    assert said[0] == said[1], said


def test_a_job_launched_again_with_the_same_master_is_a_new_run_and_the_old_one_ended():
    # `-i`: the job ends and is launched again (same --master); the earlier run's clean
    # exits are its end, not deaths beside the new run's ranks.
    hosts = cluster(3)

    def again(t):
        if t == 30:  # every rank ends cleanly; the launchers with them
            for h in hosts:
                h.gone, h.ranks, h.launcher = h.ranks, [], None
        if t == 35:  # launched again: new launchers, new ranks
            for i, h in enumerate(hosts):
                h.launcher, h.sent = 200 + i, False
                h.ranks = [FakeRank(3000 + i, i)]

    every: list[Any] = []
    findings, state = watched(hosts, 70, change=again, every=every)
    nobody_named(every)
    assert sorted(state.jobs) == ["master 10.0.0.1:6767", "master 10.0.0.1:6767 (run 1)"]
    ended = [f for f in findings if f.check == "ended"]
    assert [f.status for f in ended] == [Status.PASS]
    assert ended[0].message.startswith("3 ranks of master 10.0.0.1:6767 (run 1) ended by ")
    pace = [f for f in findings if f.check == "progress"]
    assert pace and pace[0].message.startswith("3 ranks of master 10.0.0.1:6767 running")


GLOO_TIMEOUT = ("[/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:587] TIMEOUT self_rank = 0 "
                "pair_rank = 1 peer_str = [10.0.0.2]:27549",) + ABORTED


@pytest.mark.parametrize("tails", ["gloo-timeout", "abort"])
def test_a_host_gone_quiet_whose_peers_die_for_it_is_the_cause_not_they(tails):
    # node02's link is cut: its sampler's connection (on that link) goes quiet, then gloo
    # aborts the healthy ranks of node01 and node03, which lost it.
    hosts = cluster(3)
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    for i in range(15):  # 70 s at 5 s; node02 quiet from 30 s
        if i == 10:
            for h in (hosts[0], hosts[2]):
                r = h.ranks.pop()
                r.tail = GLOO_TIMEOUT if tails == "gloo-timeout" else ABORTED
                h.gone = [r]
        for h in hosts:
            line = h.line(POLICY.interval_s)
            if h.name != "node02" or i < 6:
                state.add(streams[h.name].feed(line), received=5.0 * i)
    findings = judge(state, POLICY, 5.0 * 14, {}, {"10.0.0.2": "node02"})
    assert named(findings) == [("watch", Status.COULD_NOT_CHECK, ("node02",)),
                               ("dead", Status.FAIL, ("node02",))]
    m = findings[1].message
    assert m.startswith("node02 (no sample for 45 s) went quiet as its peers lost it")
    assert ("(gloo's timeouts name it)" in m) == (tails == "gloo-timeout")
    assert "2 peers failed after: node01 rank 0 (worker), node03 rank 2 (worker)" in m
    assert "its link or the host itself" in m
    # As the log keeps it: the cause is the quiet host; its peers are victims, by rank.
    doc = json.loads(json.dumps(finding_doc(findings[1])))
    assert doc["cause"] == "lost-host" and doc["ranks"] == []
    assert [(v["host"], v["rank"]) for v in doc["victims"]] == [("node01", 0), ("node03", 2)]


@pytest.mark.parametrize("its_rank", ["aborted", "runs-on"])
def test_a_host_cut_off_until_its_peers_died_stays_the_cause_once_it_answers_again(its_rank):
    # Seen on the rig (its link down 52 s, then up): node02 was named as the host its peers
    # lost; once its sampler answered again, its own rank's end (gloo aborted it too) came
    # in, and every rank was failed as dead on its own host, node01 and node03 with it.
    hosts = cluster(3)
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    found = {}
    for i in range(22):  # 5 s a sample; node02 cut off from 30 s to 75 s
        if i == 10:  # gloo aborts the ranks of node01 and node03
            gone(hosts[0], ABORTED)
            gone(hosts[2], ABORTED)
        if i == 15 and its_rank == "aborted":  # node02 answers: its rank was aborted too
            gone(hosts[1], ABORTED)
        for h in hosts:
            line = h.line(POLICY.interval_s)
            if h.name != "node02" or not 6 <= i < 15:
                state.add(streams[h.name].feed(line), received=5.0 * i)
        found[i] = judge(state, POLICY, 5.0 * i, {}, {"10.0.0.2": "node02"})
    assert ("dead", Status.FAIL, ("node02",)) in named(found[13])
    if its_rank == "runs-on":  # it was not the peer they lost: it is no longer the cause
        assert ("dead", Status.FAIL, ("node02",)) not in named(found[21])
        return
    assert named(found[21]) == [("dead", Status.FAIL, ("node02",))], named(found[21])
    m = found[21][0].message
    assert m.startswith("node02 (silent for 45 s, answering again) went quiet as its peers "
                        "lost it: 2 peers failed after: node01 rank 0 (worker), node03 rank 2 "
                        "(worker)"), m
    assert m.endswith("its own ranks ended too, seen once it answered: node02 rank 1 (worker)")
    doc = json.loads(json.dumps(finding_doc(found[21][0])))
    assert doc["cause"] == "lost-host"
    assert [(v["host"], v["rank"]) for v in doc["victims"]] == [
        ("node01", 0), ("node03", 2), ("node02", 1)]


def test_a_quiet_host_is_not_blamed_where_gloo_names_a_peer_that_answers():
    hosts = cluster(3)
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in hosts}
    elsewhere = (GLOO_TIMEOUT[0].replace("10.0.0.2", "10.0.0.9"),) + ABORTED
    for i in range(15):
        if i == 10:
            r = hosts[0].ranks.pop()
            r.tail = elsewhere
            hosts[0].gone = [r]
        for h in hosts:
            line = h.line(POLICY.interval_s)
            if h.name != "node02" or i < 6:
                state.add(streams[h.name].feed(line), received=5.0 * i)
    findings = judge(state, POLICY, 5.0 * 14, {}, {"10.0.0.2": "node02", "10.0.0.9": "node09"})
    assert ("dead", Status.FAIL, ("node02",)) not in named(findings)
    assert ("watch", Status.COULD_NOT_CHECK, ("node02",)) in named(findings)
