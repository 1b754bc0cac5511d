"""Which job a rank belongs to, and which attempt of it: launchers without a master are jobs of
one node each; a job run again on other hosts is a new run, its first run's clean ends no
deaths; a job whose launchers start its ranks again in place (elastic) recovered, and its
earlier attempt's deaths are not held against it."""

from __future__ import annotations

from typing import Any

from watchtools import ABORTED, POLICY, FakeHost, FakeRank, nobody_named, watched

from preflight.model.findings import Status
from preflight.watch.series import WatchState

NO_MASTER = ("python3", "-m", "paddle.distributed.launch", "--nproc_per_node", "1", "train.py")
FINISHED = ("step 5990 loss 0.052", "training finished")


def _hosts(n: int, argv=NO_MASTER) -> list[FakeHost]:
    return [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + i, i % 2)], launcher=100 + i,
                     argv=argv, netns=f"net:[{4026532000 + i}]") for i in range(n)]


def _end(host: FakeHost) -> None:
    """The host's rank ends cleanly and its launcher with it."""
    r = host.ranks.pop()
    r.tail = FINISHED
    host.gone, host.launcher = [r], None


def test_two_jobs_without_a_master_are_apart_and_one_ending_blames_nobody():
    hosts = _hosts(4)  # node01+node02 one job, node03+node04 another, as launched

    def change(t):
        if t == 300:
            for h in hosts[2:]:
                _end(h)
    judgements: list[Any] = []
    found, state = watched(hosts, 600, change=change, every=judgements)
    nobody_named(judgements)
    assert len(state.jobs) == 4  # a job of one node each: no master joins them
    ended = [f for f in found if f.check == "ended"]
    assert sorted(h for f in ended for h in f.hosts) == ["node03", "node04"]
    assert all(f.status is Status.PASS for f in ended)


def test_a_job_run_again_with_its_master_on_other_hosts_is_a_new_run():
    hosts = _hosts(4, argv=FakeHost("x", []).argv)  # one --master for both runs
    later = {h.name: h.ranks for h in hosts[2:]}
    for h in hosts[2:]:
        h.ranks, h.launcher = [], None  # not started yet

    def change(t):
        if t == 300:
            for h in hosts[:2]:
                _end(h)
        if t == 360:  # launched again, with the same command, on the other two hosts
            for h in hosts[2:]:
                h.ranks, h.launcher, h.sent = later[h.name], 200, False
    judgements: list[Any] = []
    found, state = watched(hosts, 700, change=change, every=judgements)
    nobody_named(judgements)
    assert sorted(state.jobs) == ["master 10.0.0.1:6767", "master 10.0.0.1:6767 (run 1)"]
    assert {tuple(f.hosts) for f in found if f.check == "ended"} == {("node01", "node02")}


def test_an_elastic_restart_in_place_clears_the_death_it_recovered_from():
    hosts = _hosts(4, argv=FakeHost("x", []).argv)
    for i, h in enumerate(hosts):
        h.ranks[0].rank = i

    def change(t):
        if t == 300:  # node03's rank killed; gloo aborts its peers
            for h in hosts:
                r = h.ranks.pop()
                r.tail = ABORTED if h.name != "node03" else ()
                h.gone = [r]
        if t == 315:  # every launcher starts its rank again, in place (same launcher)
            for i, h in enumerate(hosts):
                h.ranks = [FakeRank(5000 + i, i)]
    judgements: list[Any] = []
    found, _ = watched(hosts, 600, change=change, every=judgements,
                       state=WatchState(keep=12))
    dead = [(i, f.hosts) for i, fs in enumerate(judgements) for f in fs if f.check == "dead"]
    assert dead and {hosts for _, hosts in dead} == {("node03",)}, dead  # named, alone
    restarted_at = 315 / POLICY.interval_s
    assert all(i <= restarted_at for i, _ in dead), dead  # and cleared once it restarted
    nobody_named(judgements[int(restarted_at) + 1:])
    said = [f for f in found if f.check == "restarted"]
    assert said and said[0].status is Status.PASS, found
    assert "started its ranks again in place" in said[0].message
    assert "after 4 of them ended" in said[0].message
