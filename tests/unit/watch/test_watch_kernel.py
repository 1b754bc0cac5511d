"""Ranks the kernel holds (preflight/watch/rules/kernel.py): a host's ranks frozen by their
cgroup's freezer, or in D on storage that does not answer, while their peers wait; and what
it leaves alone: a rank in D writing a checkpoint, every rank writing its shard."""

from __future__ import annotations

from typing import Any

from watchtools import POLICY, cluster, nobody_named, watched

from preflight.model.findings import Status
from preflight.model.watch import blame_of


def _stall(hosts, victim, at, how):
    """A change(t) for watched(): from `at`, the ranks of victim (a host's name, or "*":
    every host) are held (how: "storage", "frozen") and every rank's pace stops, as a
    synchronous job's does."""
    def change(t):
        if t < at:
            return
        for h in hosts:
            for r in h.ranks:
                r.steps_per_s, r.busy, r.wait = 0.0, 0.01, 0.0
                if victim in (h.name, "*"):
                    r.state = "D"
                    r.frozen = how == "frozen"
    return change


def _held(findings):
    return [(f.check, f.status, f.hosts, blame_of(f).cause) for f in findings
            if f.check == "stalled"]


def test_a_host_whose_ranks_wait_on_storage_that_stands_still_is_named_not_a_hang():
    hosts = cluster(4)
    every: list[Any] = []
    found, _ = watched(hosts, 150, change=_stall(hosts, "node03", 40, "storage"), every=every)
    assert _held(found) == [("stalled", Status.FAIL, ("node03",), "storage")]
    msg = next(f.message for f in found if f.check == "stalled")
    assert "waits on storage on node03" in msg and "no bytes read or written" in msg
    assert "3 other ranks on node[01-02,04] wait for it" in msg
    # Named within the window after it began, and never a hang naming every host.
    first = next(i for i, j in enumerate(every) if _held(j))
    assert first * POLICY.interval_s - 40 <= POLICY.persist_s + POLICY.interval_s
    assert not any(f.check == "hang" for j in every for f in j)
    # Before it began, nobody.
    nobody_named(every[:8])


def test_a_host_whose_ranks_are_frozen_is_named_frozen():
    hosts = cluster(3)
    every: list[Any] = []
    found, _ = watched(hosts, 120, change=_stall(hosts, "node02", 40, "frozen"), every=every)
    assert _held(found) == [("stalled", Status.FAIL, ("node02",), "frozen")]
    assert "frozen by its cgroup's freezer" in next(f.message for f in found
                                                     if f.check == "stalled")
    assert not any(f.check == "hang" for j in every for f in j)


def test_a_rank_in_d_state_that_writes_is_a_phase_not_a_stall():
    # Rank 0 writes its checkpoint (D state, 40 MB/s) while its peers wait: not a stall.
    hosts = cluster(3)

    def change(t):
        saving = t >= 40
        for h in hosts:
            for r in h.ranks:
                r.steps_per_s = 0.0 if saving else 10.0
        r0 = hosts[0].ranks[0]
        r0.state, r0.write_rate = ("D", 40e6) if saving else ("S", 0.0)

    found, _ = watched(hosts, 90, change=change)
    assert _held(found) == []


def test_every_rank_held_names_no_host():
    # Storage the hosts share stands still: every rank waits in D; no one host is to blame.
    hosts = cluster(3)
    every: list[Any] = []
    found, _ = watched(hosts, 100, change=_stall(hosts, "*", 40, "storage"), every=every)
    said = [f for f in found if f.check == "stalled"]
    assert [(f.status, blame_of(f).cause) for f in said] == [(Status.WARN, "none")]
    assert "no one host to blame" in said[0].message
    nobody_named(every)


def test_a_single_host_job_whose_ranks_all_wait_on_storage_names_that_host():
    hosts = cluster(1)
    hosts[0].ranks.append(type(hosts[0].ranks[0])(1100, 1))
    found, _ = watched(hosts, 120, change=_stall(hosts, "node01", 40, "storage"))
    assert _held(found) == [("stalled", Status.FAIL, ("node01",), "storage")]


def test_d_state_without_storage_figures_is_not_judged():
    # An older sampler (or a kernel without task I/O accounting) gives no /proc/PID/io: a
    # rank in D could be writing; nothing is said of it by this rule.
    hosts = cluster(3)
    for h in hosts:
        for r in h.ranks:
            r.io = False
    found, _ = watched(hosts, 120, change=_stall(hosts, "node02", 40, "storage"))
    assert _held(found) == []
