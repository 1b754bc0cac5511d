"""A job not whole yet (launchers still starting its ranks, or nodes of its --nnodes with no
launcher) is said as starting, then as a failure on the nodes it waits for: never a pass."""

from __future__ import annotations

import pytest
from watchtools import POLICY, FakeHost, FakeRank, cluster, named, watched

from preflight.model.findings import Status
from preflight.watch.series import _nnodes

ARGV = ("python3", "-m", "paddle.distributed.launch", "--master", "10.0.0.1:6767",
        "--nnodes", "3", "train.py")


def job_on_one_of_three(steps_per_s: float = 0.0):
    """node01 runs the job's launcher and its rank, waiting at the rendezvous; node02 and
    node03 are watched and run nothing yet (their containers are still starting)."""
    hosts = cluster(3, steps_per_s=steps_per_s)
    for h in hosts:
        h.argv = ARGV
    for h in hosts[1:]:
        h.launcher, h.ranks = None, []
    return hosts


def test_a_job_on_one_of_its_three_nodes_is_starting_not_running():
    findings, _ = watched(job_on_one_of_three(), 20)
    assert named(findings) == [("starting", Status.SKIP, ("node02", "node03"))]
    m = findings[0].message
    assert m == ("master 10.0.0.1:6767 is starting: 1 of its 3 nodes run its launcher "
                 "(node01), none yet on node[02-03]"), m
    assert not [f for f in findings if f.check in ("progress", "hang")]


def test_nodes_that_never_start_fail_once_a_hang_would_be_named_and_no_hang_is():
    findings, _ = watched(job_on_one_of_three(), POLICY.hang_s + 20)
    assert named(findings) == [("starting", Status.FAIL, ("node02", "node03"))]
    assert findings[0].message == (
        "master 10.0.0.1:6767 is starting: it waits for 2 of its 3 nodes (--nnodes 3): "
        "node[02-03] started no launcher of it in 80 s; its 1 rank(s) on node01 wait for them "
        "at the rendezvous")


def test_once_every_node_runs_its_launcher_the_job_is_judged_as_any():
    hosts = job_on_one_of_three(steps_per_s=10.0)

    def start(t):
        if t == 15:
            for i, h in enumerate(hosts[1:], 1):
                h.launcher, h.ranks = 100, [FakeRank(1000 + i, i)]

    findings, _ = watched(hosts, 40, change=start)
    assert named(findings) == []
    assert [f.check for f in findings] == ["progress"]


def test_a_job_whose_other_nodes_are_not_watched_is_judged_on_the_watched_ones():
    # --nnodes 3, two watched hosts, both running it: the third node is elsewhere.
    hosts = cluster(2)
    for h in hosts:
        h.argv = ARGV
    findings, _ = watched(hosts, 30)
    assert [f.check for f in findings] == ["progress"] and named(findings) == []


def test_a_job_that_steps_beside_a_watched_spare_is_not_waiting_for_it():
    # --nnodes 2, one watched host runs it and steps, a watched spare runs nothing: the
    # job's other node runs outside the watch, and the spare is not one of its nodes.
    hosts = cluster(2)
    hosts[0].argv = ARGV[:6] + ("2", "train.py")
    hosts[1].launcher, hosts[1].ranks = None, []
    findings, _ = watched(hosts, 30)
    assert [f.check for f in findings] == ["progress"] and named(findings) == []


def no_rank_yet():
    hosts = cluster(2)
    for h in hosts:
        h.ranks = []
    return hosts


def test_a_launcher_with_no_rank_yet_is_starting_then_fails_when_none_comes():
    # Before, a job whose launchers had not yet started a rank got no finding at all: a
    # snapshot then (--once) exited 0, as for a healthy job.
    early, _ = watched(no_rank_yet(), 10)
    assert named(early) == [("starting", Status.SKIP, ("node01", "node02"))]
    assert early[0].message == \
        "master 10.0.0.1:6767 is starting: its launcher on node[01-02] is starting its ranks"
    late, _ = watched(no_rank_yet(), POLICY.hang_s + 10)
    assert named(late) == [("starting", Status.FAIL, ("node01", "node02"))]
    assert "started no rank in 70 s" in late[0].message


def test_a_node_whose_launcher_has_not_started_its_rank_holds_the_pass_back():
    # Every node runs its launcher; node03's rank has not started yet: its peers wait.
    hosts = cluster(3, steps_per_s=0.0)
    hosts[2].ranks = []
    findings, _ = watched(hosts, 20)
    assert named(findings) == [("starting", Status.SKIP, ("node03",))]
    assert findings[0].message == \
        "master 10.0.0.1:6767 is starting: its launcher on node03 is starting its ranks"


def two_ranks_a_node(seen: int):
    """Three nodes whose launchers start two ranks each (--nproc_per_node 2), `seen` of
    them seen on node02 so far (the second rank of a node may show a sample after the
    first: seen on the rig, the pace said of 4 ranks of 6)."""
    hosts = [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + 2 * i, 2 * i, steps_per_s=0.0),
                                           FakeRank(1001 + 2 * i, 2 * i + 1, steps_per_s=0.0)])
             for i in range(3)]
    for h in hosts:
        h.argv = (*ARGV[:-1], "--nproc_per_node", "2", "train.py")
    hosts[1].ranks = hosts[1].ranks[:seen]
    return hosts


def test_a_launcher_with_some_of_its_ranks_seen_is_still_starting():
    early, _ = watched(two_ranks_a_node(1), 10)
    assert named(early) == [("starting", Status.SKIP, ("node02",))]
    assert early[0].message == ("master 10.0.0.1:6767 is starting: its launcher on node02 "
                                "has started 1 of its 2 ranks")
    late, _ = watched(two_ranks_a_node(1), POLICY.hang_s + 10)
    assert named(late) == [("starting", Status.FAIL, ("node02",))]
    assert "its launcher on node02 started only 1 of its 2 ranks in 70 s" in late[0].message
    whole, _ = watched(two_ranks_a_node(2), 10)
    assert named(whole) == []
    assert [f.message.split(" running")[0] for f in whole if f.check == "progress"] == [
        "6 ranks of master 10.0.0.1:6767"]


@pytest.mark.parametrize("argv, n", [
    (("--nnodes", "4"), 4), (("--nnodes=2:4",), 2), (("--nnodes", " 8 "), 8),
    (("--nnodes",), None), (("--nnodes", "x"), None), (("--nnodes", "0"), None), ((), None)])
def test_the_nodes_a_launcher_says_the_job_runs_on(argv, n):
    assert _nnodes(("python3", "-m", "paddle.distributed.launch", *argv, "train.py")) == n
