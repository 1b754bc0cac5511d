"""The pace each rank is judged against follows the job (watch/baseline.py): learned after its
warm-up, then re-estimated over the judgements of the last ten minutes that said nothing of
the job. A job that got faster is judged against its pace now; its phases, a fault and a
slowdown are never learned as its pace."""

from __future__ import annotations

from typing import Any

from watchtools import cluster, nobody_named, quota_starved, watched

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
