"""A rank named short of CPU stays named while its host still holds it (rules/held.py): in a
job in its rhythm (rank 0 evaluating or saving alone for 18 s every 45 s, as the rig's
ten-minute job does), the quota's host sleeps in the collective with its peers at each of
rank 0's phases, and the busy-share rules cannot see it then. It is named at every judgement
from its first, and --act acts once it was named for --act-after, not never. Once the
quota is lifted, or the job is back at its pace, nothing is named."""

from __future__ import annotations

from typing import Any, Optional

from watchtools import POLICY, cluster, nobody_named, watched

from preflight.act.rehearse import Acting, rehearsal
from preflight.model.findings import Status
from preflight.model.watch import blame_of
from preflight.watch.score import blames

AT_CHECK = {f"node{i:02d}": {"cores": 2.0} for i in range(1, 5)}


def _at_check():
    from preflight.watch.judge import AtCheck
    return {h: AtCheck(**v) for h, v in AT_CHECK.items()}


def rhythm(hosts, quota_at: Optional[float] = None, lifted: Optional[float] = None,
           binds: bool = True, every_s: float = 45.0, for_s: float = 18.0):
    """change(t): rank 0 works alone for for_s every every_s (its peers asleep in the
    collective); from quota_at a 0.25-core quota on node02 (lifted at `lifted`) throttles its
    rank while the job steps (binds; else a quota it fits under: nothing slows)."""
    for h in hosts:
        h.ranks[0].quota = 2.0
    r0, victim = hosts[0].ranks[0], hosts[1].ranks[0]

    def change(t):
        in_phase = t >= every_s and t % every_s < for_s
        quota = quota_at is not None and t >= quota_at and (lifted is None or t < lifted)
        slow = quota and binds
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 0.0 if in_phase else (3.0 if slow else 10.0)
            r.busy, r.wait, r.state = (0.02, 0.0, "S") if in_phase else (
                (0.16, 0.02, "S") if slow else (0.4, 0.05, "S"))
            r.throttled_share = 0.0
        victim.quota = 0.25 if quota else 2.0
        if slow and not in_phase:
            victim.busy, victim.wait, victim.throttled_share, victim.state = 0.73, 0.64, 0.9, "R"
        if in_phase:
            r0.busy, r0.wait, r0.state = 1.0, 0.02, "R"
            r0.last = "evaluating on the validation set"
        else:
            r0.last = "step 120 loss 0.31"

    return change


def _named_hosts(found) -> set[str]:
    return {h for f in found if blames(f) for h in f.hosts}


def _drained_at(every, act_after_s: float) -> Optional[float]:
    act = rehearsal(Acting(act_after_s=act_after_s))(
        {"hosts": [f"node{i:02d}" for i in range(1, 5)], "plan": "r.json", "at": 0.0}, POLICY)
    for i, found in enumerate(every):
        if any(s.step == "drain" for s in act(i * POLICY.interval_s, found)):
            return i * POLICY.interval_s
    return None


def _judged(seconds: float, **kw) -> list[Any]:
    """Every judgement of a watch over 4 hosts in rhythm(**kw) for that long."""
    hosts = cluster()
    every: list[Any] = []
    watched(hosts, seconds, change=rhythm(hosts, **kw), every=every, at_check=_at_check())
    return every


def test_a_quota_in_a_job_in_its_rhythm_is_named_at_every_judgement_and_acted_on_in_time():
    every = _judged(600, quota_at=300)
    first = next(i for i, found in enumerate(every) if _named_hosts(found))
    # Never anyone before the quota; node01's phases are passes throughout.
    assert first * POLICY.interval_s > 300
    nobody_named(every[:first])
    after = every[first:]
    assert all(_named_hosts(found) == {"node02"} for found in after), \
        [(first + i, _named_hosts(f)) for i, f in enumerate(after) if _named_hosts(f) != {"node02"}]
    # Named on through rank 0's phases, by its quota, not by what its busy share says then.
    hidden = [f for found in after if any(g.check == "phase" for g in found)
              for f in found if f.check == "straggler" and "still held by its host" in f.message]
    assert hidden, "no judgement in rank 0's phase named node02 on"
    said = hidden[0]
    assert said.status is Status.FAIL and blame_of(said).cause == "cpu"
    assert said.hosts == ("node02",) and "node01 is in a phase of the job's own" in said.message
    assert "quota" in said.message, said.message
    # --act acts once it was named for --act-after, a judgement or two later at most.
    drained = _drained_at(every, 60.0)
    assert drained is not None
    assert drained - first * POLICY.interval_s <= 60.0 + 2 * POLICY.interval_s, drained


def test_the_same_job_without_the_held_rule_would_break_the_count_at_each_phase():
    # What rules/held.py is for: the busy-share rules alone leave node02 unnamed at some
    # judgements after it was first named (rank 0's phases hide it).
    every = _judged(600, quota_at=300)
    first = next(i for i, found in enumerate(every) if _named_hosts(found))
    by_rules = [any(f.check == "straggler" and "still held" not in f.message for f in found)
                for found in every[first:]]
    assert not all(by_rules), "the busy-share rules named it at every judgement by themselves"


def test_once_the_quota_is_lifted_nobody_is_named_a_window_later():
    every = _judged(600, quota_at=200, lifted=400)
    assert any(_named_hosts(found) for found in every[:80])  # named while it held
    # A window and an interval after the lift (the window still holds its throttled half).
    later = int((400 + POLICY.persist_s + POLICY.interval_s) / POLICY.interval_s)
    nobody_named(every[later:])


def test_a_quota_the_rank_fits_under_names_nobody_in_any_phase():
    # A quota set since the check that does not slow the job: no rule names the rank, so
    # nothing is kept on for it either.
    every = _judged(500, quota_at=100, binds=False)
    nobody_named(every)
