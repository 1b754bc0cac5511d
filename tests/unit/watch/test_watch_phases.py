"""Phases of the job's own: a rank busy while its peers wait with nothing on its host holding
it (rank 0 evaluating, saving a checkpoint) is said as a phase with what tells it, never a
straggler, over every judgement; one that runs far longer than its earlier ones or past
--phase-max is a warning, never an action; every rank writing files with no step is a save,
not a hang, until --phase-max; a busy rank whose GPU is slowed is the GPU's straggler."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from watchtools import POLICY, cluster, gpu_cluster, named, nobody_named, watched

from preflight.act.recover import longest_phase as longest
from preflight.act.rehearse import Acting, rehearsal
from preflight.model.findings import Status

SAVE_LINE = "[2026-11-29 07:30:01] saving checkpoint to ckpt/epoch_3.pdparams"


def saving(hosts, every_s: float, for_s: float, writes: float = 40e6, line: str = SAVE_LINE,
           since: float = 60.0, long_at: float = -1.0, long_for: float = 0.0):
    """change(t): rank 0 saves alone for for_s every every_s from since (longer, long_for,
    in the spell starting at long_at), writing `writes` bytes a second; its peers wait."""
    r0 = hosts[0].ranks[0]

    def change(t):
        into = (t - since) % every_s  # into the spell that started last
        length = long_for if t - into == long_at else for_s
        in_phase = t >= since and into < length
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 0.0 if in_phase else 10.0
            r.busy, r.wait, r.state = (0.02, 0.0, "S") if in_phase else (0.4, 0.05, "S")
        if in_phase:
            r0.busy, r0.wait, r0.state, r0.write_rate = 1.0, 0.02, "R", writes
            r0.last = line
        else:
            r0.write_rate = 0.0
            r0.last = "step 120 loss 0.31"

    return change


def phases(findings, check="phase"):
    return [f for f in findings if f.check == check]


def test_rank_0s_checkpoints_are_phases_said_with_their_writes_and_log_line_never_blamed():
    hosts = cluster()
    every: list[Any] = []
    findings, _ = watched(hosts, 600, change=saving(hosts, 120, 25), every=every)
    nobody_named(every)
    said = [f for found in every for f in phases(found)]
    assert said and {f.hosts for f in said} == {("node01",)}
    assert all(f.status is Status.PASS for f in said)
    first = said[0].message
    assert first.startswith("node01 rank 0 (worker) is in a phase of the job's own: busy "), first
    assert "while its 3 peers wait" in first and "nothing on node01 holding it" in first
    assert "it writes 40 MB/s to files: a save" in first, first
    assert "its log says '[2026-11-29 07:30:01] saving checkpoint to" in first, first
    # Its later saves are said against the earlier ones, with their cadence.
    last = said[-1].message
    assert "such before it (" in last and "every 120 s)" in last, last
    # The pass line says the busy rank is in a phase, not that none is busy.
    paces = [f for found in every for f in found if f.check == "progress" and found
             and any(g.check == "phase" for g in found)]
    assert paces and all("but in a phase of the job's own" in f.message for f in paces)


def test_an_evaluation_with_no_writes_and_no_words_is_a_phase_too():
    # Nothing on its host holds it: the job's own work, whatever it is.
    hosts = cluster()
    every: list[Any] = []
    watched(hosts, 300, change=saving(hosts, 600, 45, writes=0.0, line="step 90"),
            every=every)
    nobody_named(every)
    said = [f for found in every for f in phases(found)]
    assert said and "writes" not in said[0].message and "log says" not in said[0].message


def test_a_phase_with_the_users_own_pattern_quotes_its_line():
    hosts = cluster()
    policy = replace(POLICY, phase_pattern=r"dumping tables")
    every: list[Any] = []
    watched(hosts, 120, policy=policy, every=every,
            change=saving(hosts, 600, 30, writes=0.0, line="dumping tables of shard 3"))
    said = [f for found in every for f in phases(found)]
    assert said and "its log says 'dumping tables of shard 3'" in said[-1].message


def test_a_phase_past_phase_max_is_a_warning_never_acted_on():
    hosts = cluster()
    policy = replace(POLICY, phase_max_s=60.0)
    every: list[Any] = []
    watched(hosts, 200, policy=policy, every=every,
            change=saving(hosts, 1000, 150, since=20.0))
    warned = [f for found in every for f in phases(found) if f.status is Status.WARN]
    assert warned and {f.hosts for f in warned} == {("node01",)}
    assert "past --phase-max 60 s" in warned[0].message and "not acted on" in warned[0].message
    assert not [f for found in every for f in found if f.status is Status.FAIL]
    assert _acted(every, policy) == []


def test_a_phase_three_times_its_longest_earlier_one_is_a_warning():
    hosts = cluster()
    every: list[Any] = []
    # 25 s saves every 300 s; the one starting at 660 s lasts 200 s.
    watched(hosts, 900, every=every,
            change=saving(hosts, 300, 25, long_at=660.0, long_for=200.0))
    warned = [f for found in every for f in phases(found) if f.status is Status.WARN]
    assert warned, [f.message for found in every for f in phases(found)][-1:]
    assert "x its longest earlier phase" in warned[0].message, warned[0].message
    # Before that spell, nothing but passes.
    before = every[:660 // 5 + 15]
    nobody_named(before)


def test_the_longest_phase_is_read_off_the_findings():
    hosts = cluster()
    findings, _ = watched(hosts, 100, change=saving(hosts, 600, 45), every=[])
    assert 30 <= longest(findings) <= 50, longest(findings)


def test_every_rank_writing_with_no_step_is_a_save_not_a_hang_then_a_warning():
    hosts = cluster()

    def sharded(t):
        if t >= 30:  # each rank writes its shard; no step anywhere
            for h in hosts:
                r = h.ranks[0]
                r.steps_per_s, r.busy, r.state, r.write_rate = 0.0, 0.4, "D", 30e6

    every: list[Any] = []
    policy = replace(POLICY, phase_max_s=150.0)
    watched(hosts, 240, policy=policy, change=sharded, every=every)
    seen = [(i, f.status) for i, found in enumerate(every) for f in found if f.check == "phase"]
    saves = [i for i, status in seen if status is Status.PASS]
    warned = [i for i, status in seen if status is Status.WARN]
    assert saves and warned and max(saves) < min(warned), seen
    nobody_named(every[:min(warned)])
    assert not [f for found in every for f in found if f.check == "hang"]
    said = next(f for f in every[saves[0]] if f.check == "phase")
    assert said.message.startswith("every one of 4 ranks writes files (120 MB/s in all) "
                                   "with no step for "), said.message
    assert said.hosts == ("node01", "node02", "node03", "node04")
    late = next(f for f in every[warned[0]] if f.check == "phase")
    assert "past --phase-max 150 s" in late.message and "not acted on" in late.message
    assert _acted(every, policy) == []


def test_every_rank_evaluating_past_the_hang_bar_is_a_phase_not_a_hang():
    # A CPU job whose every rank evaluates for 2 minutes: each computes a core, no step
    # anywhere. Ranks hung in a collective sleep; these work.
    hosts = cluster()

    def evaluate(t):
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s, r.busy, r.wait, r.state = (
                (0.0, 0.95, 0.03, "R") if 30 <= t < 150 else (10.0, 0.4, 0.05, "S"))

    every: list[Any] = []
    watched(hosts, 200, change=evaluate, every=every)
    nobody_named(every)
    said = [f for found in every for f in found if f.check == "phase"]
    assert said and said[0].message.startswith("every one of 4 ranks computes (busy "), said
    assert "not a hang" in said[0].message


def test_every_gpu_rank_busy_with_no_step_is_still_a_hang():
    # NCCL's waits spin: in a job hung in a collective every GPU rank keeps a core busy.
    hosts = gpu_cluster()

    def hung(t):
        if t >= 30:
            for h in hosts:
                r = h.ranks[0]
                r.steps_per_s, r.busy, r.wait, r.state = 0.0, 0.98, 0.02, "R"

    findings, _ = watched(hosts, 120, change=hung)
    assert [f.check for f in findings if f.status is Status.FAIL] == ["hang"]


def test_every_rank_asleep_with_no_step_is_still_a_hang():
    hosts = cluster()

    def hung(t):
        if t >= 30:
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 0.0, 0.01

    findings, _ = watched(hosts, 120, change=hung)
    assert named(findings) == [("hang", Status.FAIL, ("node01", "node02", "node03", "node04"))]


def test_a_busy_rank_whose_gpu_is_slowed_is_the_gpus_straggler_not_a_phase():
    hosts = gpu_cluster()

    def slowed(t):
        if t >= 30:
            for h in hosts[1:]:
                h.ranks[0].busy, h.ranks[0].steps_per_s = 0.1, 4.0
            hosts[0].ranks[0].busy, hosts[0].ranks[0].steps_per_s = 1.0, 4.0
            hosts[0].gpus[0].update(sm=900, reasons=0x20, power_w=300.0)

    findings, _ = watched(hosts, 90, change=slowed)
    assert not phases(findings)
    assert named(findings) == [("straggler", Status.FAIL, ("node01",))], \
        [f.message for f in findings]


def _acted(every, policy) -> list[str]:
    act = rehearsal(Acting())({"hosts": ["node01"], "plan": "r.json", "at": 0.0}, policy)
    return [s.step for i, found in enumerate(every) for s in act(float(i), found)
            if s.step in ("drain", "stop", "check")]


def test_a_wall_clock_stepped_back_moves_nothing_where_the_sampler_says_its_monotonic_clock():
    # An NTP step of -20 s on one host: its next interval would read -15 s long, and its
    # ranks' CPU seconds a rate of cores they never had. On the monotonic clock it is 5 s.
    hosts = cluster()
    for h in hosts:
        h.mono = 7_000.0

    def step(t):
        if t == 60:
            hosts[2].t -= 20.0

    every: list[Any] = []
    _, state = watched(hosts, 120, change=step, every=every)
    nobody_named(every)
    assert not [f for found in every for f in found if f.check in ("phase", "shape")]
    stream = state._streams["node03"]
    assert round(stream.stepped) == -20
    times = [s.t for s in state.hosts["node03"]]
    assert all(round(b - a, 3) == 5.0 for a, b in zip(times, times[1:])), times


def test_an_older_samplers_stepped_clock_is_never_a_straggler():
    # Without the monotonic clock the step reads as busy cores on one host: with nothing on
    # its host holding it, never blamed (said as a phase at most).
    hosts = cluster()

    def step(t):
        if t == 60:
            hosts[2].t -= 20.0

    every: list[Any] = []
    watched(hosts, 120, change=step, every=every)
    nobody_named(every)


def test_a_job_its_own_collective_timeout_ends_during_a_phase_blames_no_host():
    # Rank 0 saves for 35 s from 60 s; gloo's collective waits 30 s for it and aborts its
    # peers at 95 s, then rank 0 finds them gone as its save ends (Paddle 3.3.1's words).
    from synthjob import GLOO_ENFORCE
    from watchtools import ABORTED
    hosts = cluster(3)
    save = saving(hosts, 600, 60, since=60)

    def change(t):
        if t < 95:  # then rank 0 stays as it was: saving
            save(t)
        if t == 95:
            for h in hosts[1:]:
                r = h.ranks.pop()
                r.tail, h.gone = GLOO_ENFORCE, [r]
        if t == 100:
            r = hosts[0].ranks.pop()
            r.tail, hosts[0].gone = ABORTED, [r]

    every: list[Any] = []
    found, _ = watched(hosts, 130, change=change, every=every)
    nobody_named(every)
    assert not [f for fs in every for f in fs if f.check == "dead"]
    [said] = [f for f in found if f.check == "ended"]
    assert said.status is Status.WARN and said.hosts == ("node01", "node02", "node03")
    assert said.message.startswith("the job master 10.0.0.1:6767 ended by its own collective "
                                   "timeout: its ranks aborted when a collective waited 30 s "
                                   "(gloo's timeout) for node01 rank 0 (worker), in a phase of "
                                   "the job's own since "), said.message
    assert "no host to blame" in said.message


def test_a_collective_timeout_with_no_phase_open_is_still_a_death():
    # The same timeout where no rank was in a phase: a peer that died or hung is the cause,
    # and the ends rules name it as before.
    from synthjob import GLOO_ENFORCE
    hosts = cluster(3)

    def change(t):
        if t == 60:  # node03's rank killed without a word
            r = hosts[2].ranks.pop()
            r.tail, hosts[2].gone = (), [r]
        if t == 65:
            for h in hosts[:2]:
                r = h.ranks.pop()
                r.tail, h.gone = GLOO_ENFORCE, [r]

    found, _ = watched(hosts, 100, change=change)
    assert not [f for f in found if "collective timeout" in f.message]
    assert [f.hosts for f in found if f.check == "dead"] == [("node03",)]


def _evaluating_on(hosts, peers_wait: float):
    """change(t): from 30 s on, rank 0 computes more (0.76 cores, 0.31 of it
    waiting for a CPU) while its peers wait in the collective and the job steps at 0.3 x, each
    peer waiting peers_wait a second
    for a CPU of its short spells on one."""
    def change(t):
        if t < 30:
            return
        for h in hosts:
            h.ranks[0].steps_per_s, h.ranks[0].busy, h.ranks[0].wait = 3.0, 0.27, peers_wait
        hosts[0].ranks[0].busy, hosts[0].ranks[0].wait, hosts[0].ranks[0].state = 0.76, 0.31, "R"
    return change


def test_a_rank_that_waits_for_shared_cores_as_long_per_second_run_as_its_peers_is_in_a_phase():
    # Seen on hosts that share their cores (the rig's namespaces on one kernel, containers on
    # one node): rank 0 evaluating waits for a CPU 0.31 s a second, past the bar, only because
    # it asks for one more often; its peers wait as long per second they run (0.09 of 0.18).
    hosts = cluster()
    every: list[Any] = []
    watched(hosts, 90, change=_evaluating_on(hosts, 0.09), every=every)
    nobody_named(every)
    said = [f for found in every for f in phases(found)]
    assert said and {f.hosts for f in said} == {("node01",)}, said
    assert "no longer wait for a CPU per second run than its peers'" in said[-1].message


def test_a_rank_that_waits_for_a_cpu_where_its_peers_do_not_is_held_by_its_host():
    # The same figures for rank 0 where its peers wait next to nothing for a CPU (a cluster's
    # hosts): something else on node01 takes its cores.
    hosts = cluster()
    findings, _ = watched(hosts, 90, change=_evaluating_on(hosts, 0.005))
    assert named(findings) == [("straggler", Status.FAIL, ("node01",))], findings
    assert "it waits for a CPU 0.31 s a second (other work on node01" in findings[0].message


@pytest.mark.parametrize("pressure,is_named", [((40.0, 41.0, 39.0, 40.0), False),
                                               ((40.0, 2.0, 3.0, 2.0), True)],
                         ids=["every-host-alike", "its-host-alone"])
def test_where_the_peers_sleep_a_busy_ranks_wait_is_told_by_its_hosts_cpu_pressure(
        pressure, is_named):
    # Rank 0 computes alone, waiting for a CPU 0.31 s a second, while its peers sleep in
    # the collective (they hardly run: no wait per second run to compare). Every host under
    # the same CPU pressure (cores shared with other work everywhere, the rig's one kernel):
    # its own work, a phase. Its host alone pressed: other work there takes its cores.
    hosts = cluster()
    for h, psi in zip(hosts, pressure):
        h.psi_cpu = psi

    def change(t):
        if t < 30:
            return
        for h in hosts:
            h.ranks[0].steps_per_s, h.ranks[0].busy, h.ranks[0].wait = 3.0, 0.01, 0.0
        hosts[0].ranks[0].busy, hosts[0].ranks[0].wait, hosts[0].ranks[0].state = 0.76, 0.31, "R"

    every: list[Any] = []
    findings, _ = watched(hosts, 90, change=change, every=every)
    if is_named:
        assert named(findings) == [("straggler", Status.FAIL, ("node01",))], findings
    else:
        nobody_named(every)
        assert [f for f in findings if f.check == "phase"], findings


def test_the_steps_after_a_sharded_save_are_no_unexplained_slowdown():
    # Every rank saves its shard for 80 s (no step, past the hang bar), then steps again,
    # slowly at first (its page cache written back): the first windows after still hold the
    # save's missing steps, which the save explained; no judgement says the job slowed for
    # nothing.
    hosts = cluster()

    def sharded(t):  # the sample at t covers the 5 s before it
        in_save = 60 < t <= 140
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s, r.busy, r.state, r.write_rate = \
                (0.0, 0.4, "D", 30e6) if in_save else (3.0 if t == 145 else 10.0, 0.4, "S", 0.0)

    every: list[Any] = []
    watched(hosts, 240, change=sharded, every=every)
    nobody_named(every)
    assert [f for found in every for f in found if f.check == "phase"]
    slowed = [f.message for found in every for f in found if "pace_ratio" in f.data]
    assert slowed == [], slowed
