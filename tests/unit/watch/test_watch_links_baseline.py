"""A network-bound job: its all-reduce keeps every send queue of its ring full while it keeps
its pace. Once its pace falls, a full queue is news only where it was not usually full then,
or where it stays as full as then while the job's other pairs drain: a job slowing together
with its queues much as they were blames nobody, at any judgement; a link slowed on one host
is still named, and only that host; so is one where only rank 0 prints step lines."""

from __future__ import annotations

from typing import Any

from watchtools import cluster, named, nobody_named, watched

from preflight.model.findings import Status

ADDRESSES = {f"10.0.0.{i + 1}": f"node{i + 1:02d}" for i in range(4)}
RING = [("node01", "10.0.0.2"), ("node02", "10.0.0.3"), ("node03", "10.0.0.4"),
        ("node04", "10.0.0.1")]
SLOWED_AT = 150.0


def network_bound(hosts, full_after, ring=RING):
    """change(t): every pair of the ring full while the job keeps its pace (10 steps/s);
    from SLOWED_AT on, every rank at half that, and the pairs full_after(t, n) gives (n:
    the sample's number since then) full."""
    n = {"i": 0}

    def change(t):
        slowed = t >= SLOWED_AT
        full = set(ring) if not slowed else full_after(t, n["i"])
        n["i"] += slowed
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 5.0 if slowed else 10.0
            r.sendq = {dst: 200 << 10 for src, dst in full if src == h.name}

    return change


def test_a_network_bound_job_slowing_together_with_its_queues_mostly_full_blames_nobody():
    # Seen in seeded jobs: node02's two pairs each full in 3 of every 4 samples for a minute
    # (a window's 75 %: the host in every full pair, blamed before), the other two in every
    # other sample. Nothing stays as full as at its pace: the job slowed as a whole.
    def mostly(t, i):
        full = {RING[2], RING[3]} if i % 2 == 0 else set()
        return full | {p for p, gap in ((RING[0], 0), (RING[1], 2)) if i % 4 != gap}

    hosts = cluster()
    every: list[Any] = []
    watched(hosts, 300, change=network_bound(hosts, mostly), addresses=ADDRESSES,
            every=every, real_clock=True)
    nobody_named(every)


def test_two_hosts_slowing_together_with_both_queues_still_full_tell_no_link():
    # Both ways full at its pace and after: which end, or the job's own compute, nothing
    # says (blamed before as the link between them).
    hosts = cluster(2)
    pair = [("node01", "10.0.0.2"), ("node02", "10.0.0.1")]
    every: list[Any] = []
    watched(hosts, 300, change=network_bound(hosts, lambda t, i: set(pair), pair),
            addresses=ADDRESSES, every=every, real_clock=True)
    nobody_named(every)


def test_a_link_slowed_both_ways_on_a_network_bound_job_is_its_host_and_only_its():
    # node02's link slowed both ways: its two pairs stay full, the others drain.
    hosts = cluster()
    every: list[Any] = []
    watched(hosts, 300, change=network_bound(hosts, lambda t, i: {RING[0], RING[1]}),
            addresses=ADDRESSES, every=every, real_clock=True)
    said = {n for found in every for n in named(found)}
    assert said == {("straggler", Status.FAIL, ("node02",))}, said
    first = next(i for i, found in enumerate(every) if named(found))
    # Told over twice the window once the job is seen to slow (15 s): within 45 s.
    assert first * 5 - SLOWED_AT <= 45, first * 5


def test_a_link_slowed_where_only_rank_0_prints_step_lines_is_named():
    # Its peers' logs grow without step lines: their pace reads as none, and the job is seen
    # to slow by the ranks whose pace can be read.
    hosts = cluster()
    for h in hosts[1:]:
        h.ranks[0].no_step_lines = True
    every: list[Any] = []
    watched(hosts, 300, change=network_bound(hosts, lambda t, i: {RING[0], RING[1]}),
            addresses=ADDRESSES, every=every, real_clock=True)
    said = {n for found in every for n in named(found)}
    assert said == {("straggler", Status.FAIL, ("node02",))}, said


def test_queues_full_only_once_the_pace_fell_are_news_as_before():
    # A job that is not network-bound: no queue full at its pace; node02's fill as it slows.
    hosts = cluster()

    def change(t):
        slowed = t >= SLOWED_AT
        for h in hosts:
            r = h.ranks[0]
            r.steps_per_s = 4.0 if slowed else 10.0
            r.sendq = {dst: 200 << 10 for src, dst in RING[:2] if src == h.name and slowed}

    every: list[Any] = []
    watched(hosts, 240, change=change, addresses=ADDRESSES, every=every, real_clock=True)
    said = {n for found in every for n in named(found)}
    assert said == {("straggler", Status.FAIL, ("node02",))}, said


def test_the_pass_line_of_a_job_where_only_rank_0_prints_step_lines_says_its_pace_is_rank_0s():
    hosts = cluster()
    for h in hosts[1:]:
        h.ranks[0].no_step_lines = True
    found, _ = watched(hosts, 60, real_clock=True)
    [line] = [f.message for f in found if f.check == "progress"]
    assert ", 10 step lines/s a rank (from node01 rank 0 (worker)'s step lines alone: its 3 " \
        "peers print none); none stopped;" in line, line
    assert "the job at 1.00 x its early pace" in line, line
