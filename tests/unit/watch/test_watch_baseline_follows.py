"""The pace each rank is judged against follows the job (watch/baseline.py): learned after its
warm-up, then re-estimated over the judgements of the last ten minutes that said nothing of
the job. A job that got faster is judged against its pace now; its phases, a fault and a
slowdown are never learned as its pace."""

from __future__ import annotations

from typing import Any

from watchtools import cluster, named, nobody_named, quota_starved, watched

from preflight.model.findings import Status
from preflight.watch.baseline import FOLLOW_AFTER_S
from preflight.watch.series import WatchState


def _paces(state) -> list[float]:
    job = next(iter(state.jobs.values()))
    return [r.early_rate["steps"] for r in job.live()]


def test_a_job_that_got_faster_is_judged_against_its_pace_now():
    # 10 steps a second, then 16 from 3 minutes on (its data cached); at 8 minutes it falls
    # to 11 with no cause seen: 0.69 x its pace now, though above its first pace.
    hosts = cluster()

    def change(t):
        for h in hosts:
            h.ranks[0].steps_per_s = 10.0 if t < 180 else (16.0 if t < 480 else 11.0)

    every: list[Any] = []
    _, state = watched(hosts, 600, change=change, every=every)
    before = int(480 / 5)
    nobody_named(every[:before])
    assert all(15.0 <= p <= 17.0 for p in _paces(state)), _paces(state)
    slowed = [i * 5 for i, found in enumerate(every) for f in found
              if f.check == "progress" and "pace_ratio" in f.data]
    assert slowed and slowed[0] > 480, slowed
    said = next(f for f in every[slowed[0] // 5] if "pace_ratio" in f.data)
    assert 0.6 <= said.data["pace_ratio"] <= 0.75, said.message


def test_the_first_pace_holds_until_judgements_that_said_nothing_span_two_minutes():
    # Learned at 10 steps a second over its first window; 14 from 40 s on.
    hosts = cluster()

    def change(t):
        for h in hosts:
            h.ranks[0].steps_per_s = 10.0 if t < 40 else 14.0

    every: list[Any] = []
    _, state = watched(hosts, FOLLOW_AFTER_S - 10, change=change, every=every)
    nobody_named(every)
    assert all(9.0 <= p <= 11.0 for p in _paces(state)), _paces(state)
    for h in hosts:  # the same job watched on: the judgements that said nothing span more
        h.ranks[0].steps_per_s = 14.0
    _, state = watched(hosts, 200, state=state, every=every)
    nobody_named(every)
    assert all(13.0 <= p <= 15.0 for p in _paces(state)), _paces(state)


def test_a_fault_that_holds_most_of_ten_minutes_is_not_learned_as_its_pace():
    # A quota slows every rank to 3 steps a second for 400 s, most of the ten minutes the
    # pace is followed over (its host named): the pace the job is judged against stays its
    # own, while it holds and after.
    hosts = cluster()
    slow = quota_starved(hosts, victim=1, at=240)
    paces: list[float] = []

    def change(t):
        slow(t)
        if t == 635:
            paces.extend(_paces(state))
        if t == 640:  # lifted: every rank back at its pace
            for h in hosts:
                r = h.ranks[0]
                r.steps_per_s, r.busy, r.wait, r.throttled_share, r.state = \
                    10.0, 0.4, 0.05, 0.0, "S"
                r.quota = 2.0

    every: list[Any] = []
    state = WatchState(keep=12)
    watched(hosts, 760, change=change, every=every, state=state)
    named = {i * 5 for i, found in enumerate(every) for f in found if f.hosts == ("node02",)
             and f.check == "straggler"}
    assert named and min(named) < 270 and max(named) < 680, sorted(named)
    assert len(paces) == 4 and all(9.0 <= p <= 11.0 for p in paces), paces
    assert all(9.0 <= p <= 11.0 for p in _paces(state)), _paces(state)


def _evaluating(hosts, first_for: float, every_s: float = 120.0, for_s: float = 25.0,
                since: float = 300.0):
    """change(t): rank 0 evaluates alone (busy 1.0, its peers waiting) from the watch's start
    for first_for seconds, then for for_s every every_s from since; steps at 10 a second
    between."""
    def change(t):
        into = (t - since) % every_s
        in_phase = t < first_for or (t >= since and into < for_s)
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 0.0 if in_phase else 10.0
            r.busy, r.wait = (0.02, 0.0) if in_phase else (0.4, 0.05)
        if in_phase:
            hosts[0].ranks[0].busy, hosts[0].ranks[0].wait = 1.0, 0.02
    return change


def _said(every, check):
    return sorted({i * 5 for i, found in enumerate(every) for f in found
                   if f.check == check and f.hosts == ("node01",)})


def test_a_watch_that_came_while_rank_0_evaluated_learns_its_steady_shape_from_its_steps():
    # The watch comes while rank 0 evaluates (55 s, its peers waiting): its first window
    # takes rank 0 for busier by design. Its steady steps from 55 s on say otherwise, and
    # once the judgements that said nothing span two minutes its shape follows them: its
    # evaluations from 300 s on are said as phases, no longer as the job's shape.
    hosts = cluster()
    every: list[Any] = []
    _, state = watched(hosts, 560, change=_evaluating(hosts, 55), every=every)
    nobody_named(every)
    shape, phase = _said(every, "shape"), _said(every, "phase")
    assert shape and max(shape) < 300, shape  # its first spell said as its shape, then never
    assert phase and min(phase) >= 300 and max(phase) >= 420, phase
    r0 = next(r for r in next(iter(state.jobs.values())).live() if r.rid.host == "node01")
    assert r0.early is not None
    assert all(0.3 <= x.busy_s / x.dt <= 0.5 for x in r0.early), r0.early


def test_a_rank_busier_by_design_keeps_its_shape_while_it_is_followed():
    # Rank 0 busier from its start and all along (0.9 cores, its peers 0.4): its followed
    # shape stays that, said as the job's shape at every judgement after its first window,
    # never a phase; a quota set on it at 400 s still names it.
    hosts = cluster()
    r0 = hosts[0].ranks[0]
    r0.busy, r0.quota = 0.9, 2.0

    def change(t):
        if t == 400:
            for h in hosts[1:]:
                h.ranks[0].busy = 0.16
            r0.quota, r0.throttled_share = 0.5, 0.9

    every: list[Any] = []
    _, state = watched(hosts, 460, change=change, every=every)
    nobody_named(every[:80])
    assert not _said(every, "phase")
    assert set(range(30, 400, 5)) <= set(_said(every, "shape")), _said(every, "shape")
    job = next(iter(state.jobs.values()))
    assert job.shapes.taken, "its shape was never followed"
    followed = next(r for r in job.live() if r.rid.host == "node01").early
    assert followed is not None and all(0.85 <= x.busy_s / x.dt <= 0.95 for x in followed)
    assert ("straggler", Status.FAIL, ("node01",)) in named(every[-1])
