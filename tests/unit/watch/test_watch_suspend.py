"""A job suspended as a whole (every rank stopped together: `scontrol suspend`, a SIGSTOP to
all of it) is said as such, blaming nobody and never a hang, over every judgement; ranks
stopped one after another are each their own, the first holding the rest."""

from __future__ import annotations

from typing import Any

from watchtools import cluster, named, nobody_named, watched

from preflight.model.findings import Status
from preflight.model.watch import blame_of


def test_every_rank_stopped_together_is_the_job_suspended_and_nobody_is_blamed():
    hosts = cluster()

    def suspend(t):
        for h in hosts:
            h.ranks[0].state = "T" if 40 <= t < 140 else "S"

    every: list[Any] = []
    watched(hosts, 200, change=suspend, every=every)
    nobody_named(every)
    said = [f for found in every for f in found if f.check == "suspended"]
    assert said and all(f.status is Status.WARN for f in said)
    assert said[0].hosts == ("node01", "node02", "node03", "node04")
    assert said[0].message.startswith("the job master 10.0.0.1:6767 is suspended as a whole: "
                                      "its 4 ranks stopped (state T) together at ")
    assert blame_of(said[0]).cause == "job-stopped"
    assert not [f for found in every for f in found if f.check in ("hang", "stopped")]
    # Resumed, it steps again: nothing is said of it any more.
    assert not [f for f in every[-1] if f.check == "suspended"]


def test_ranks_stopped_one_after_another_are_each_stopped_the_first_holding_the_rest():
    hosts = cluster(2)

    def stop(t):
        if t == 40:
            hosts[0].ranks[0].state = "T"
        if t == 70:
            hosts[1].ranks[0].state = "T"

    findings, _ = watched(hosts, 80, change=stop)
    assert ("stopped", Status.FAIL, ("node01",)) in named(findings)
    assert not [f for f in findings if f.check == "suspended"]
