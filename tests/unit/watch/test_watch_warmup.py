"""A job watched from its launch: its ranks' first seconds are imports, not steps. Each rank's
early figures (its pace, its busy shares: what the job is by design) are learned from when it
first steps, so a rank busier by design is the job's shape, and a link slowed later is a pace
that fell; a rank that never steps is taken as warm after two windows."""

from __future__ import annotations

from typing import Any

from watchtools import POLICY, cluster, named, nobody_named, watched

from preflight.model.findings import Status
from preflight.watch.series import WARMUP_AT_MOST

ADDRESSES = {f"10.0.0.{i + 1}": f"node{i + 1:02d}" for i in range(4)}
IMPORTS_S = 30.0


def importing(hosts, busier: float = 0.0):
    """change(t): every rank imports (busy, no step) for IMPORTS_S, then steps; node01's
    rank busier than its peers by design from its first step where busier is given."""

    def change(t):
        for h in hosts:
            r = h.ranks[0]
            if t < IMPORTS_S:
                r.steps_per_s, r.busy, r.state = 0.0, 0.95, "R"
            elif t == IMPORTS_S:
                r.steps_per_s, r.busy, r.state = 10.0, 0.3, "S"
        if t == IMPORTS_S and busier:
            hosts[0].ranks[0].busy = busier

    return change


def test_a_rank_busier_by_design_watched_from_the_launch_is_the_jobs_shape():
    hosts = cluster()
    every: list[Any] = []
    findings, _ = watched(hosts, 120, change=importing(hosts, busier=0.9), every=every)
    nobody_named(every)
    shape = [f for f in findings if f.check == "shape"]
    assert [f.hosts for f in shape] == [("node01",)], [f.message for f in findings]
    assert "as it was from the start (0.90, they 0.30)" in shape[0].message, shape[0].message


def test_a_link_slowed_after_a_watched_launch_is_found_against_the_pace_after_imports():
    hosts = cluster(3)
    imports = importing(hosts)

    def change(t):
        imports(t)
        if t == 90:  # node02's link slowed both ways: the job at 0.4 x
            hosts[0].ranks[0].sendq = {"10.0.0.2": 200 << 10}
            hosts[1].ranks[0].sendq = {"10.0.0.3": 150 << 10}
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 4.0, 0.12

    findings, state = watched(hosts, 130, change=change, addresses=ADDRESSES)
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))], \
        [f.message for f in findings]
    (job,) = state.jobs.values()
    # Its early pace is its steps' after the imports, not the imports' none.
    assert all(r.early_rate["steps"] > 9 for r in job.ranks.values())


def test_a_rank_that_never_steps_is_taken_as_warm_after_two_windows():
    hosts = cluster(2, no_step_lines=True)
    _, state = watched(hosts, 60)
    (job,) = state.jobs.values()
    for r in job.ranks.values():
        assert r.warm is not None and r.first_t is not None
        assert r.warm - r.first_t == WARMUP_AT_MOST * POLICY.persist_s
