"""A worker short of CPU where its peers are not, once the job slowed (rules/cpu.py's
starved_ranks): what busier_ranks cannot see where waiting ranks spin (NCCL's busy waits), and
what it must leave alone: a rank that waits for a CPU longer while the job keeps its pace."""

from __future__ import annotations

from typing import Any

from watchtools import gpu_cluster, named, nobody_named, watched

from preflight.model.findings import Status
from preflight.model.watch import blame_of


def _spinning(hosts):
    for h in hosts:
        for r in h.ranks:
            r.busy, r.wait, r.state = 0.98, 0.04, "R"


def _from(at, planted):
    """A change(t) for watched(): planted() at every interval from `at` on."""
    return lambda t: planted() if t >= at else None


def test_a_starved_rank_among_spinning_peers_is_named_by_its_cpu_wait_and_throttling():
    hosts = gpu_cluster(4)
    _spinning(hosts)

    def starved():
        for h in hosts:
            h.ranks[0].steps_per_s = 3.0  # the job at 0.3 x
        r = hosts[2].ranks[0]
        # Throttled by a 0.25-core quota: on a CPU 0.25 s a second, waiting 0.64 more: as
        # busy as its spinning peers.
        r.quota, r.throttled_share, r.busy, r.wait = 0.25, 0.9, 0.89, 0.64

    found, _ = watched(hosts, 120, change=_from(60, starved))
    assert named(found, "straggler") == [("straggler", Status.FAIL, ("node03",))]
    f = next(f for f in found if f.check == "straggler")
    assert blame_of(f).cause == "cpu"
    assert "short of CPU while its 3 peers are not" in f.message
    assert "throttles it" in f.message


def test_a_rank_that_waits_longer_while_the_job_keeps_its_pace_is_nobodys_fault():
    # Seen on the rig: other work in one host's cgroup doubled its ranks' wait for a CPU
    # (0.2 to 0.4 s a second) while the network-bound job kept its pace.
    hosts = gpu_cluster(4)
    _spinning(hosts)

    def waits_longer():
        hosts[1].ranks[0].wait = 0.45

    every: list[Any] = []
    watched(hosts, 150, change=_from(60, waits_longer), every=every)
    nobody_named(every)


def test_every_rank_waiting_longer_as_the_job_slows_names_nobody():
    # The job slows as a whole (a shared CPU pool, a slower phase): no rank stands apart.
    hosts = gpu_cluster(4)
    _spinning(hosts)

    def all_slower():
        for h in hosts:
            h.ranks[0].steps_per_s, h.ranks[0].wait = 4.0, 0.5

    every: list[Any] = []
    watched(hosts, 150, change=_from(60, all_slower), every=every)
    nobody_named(every)
