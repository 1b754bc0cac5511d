"""What holds for every registered check."""

from __future__ import annotations

from support import REFUSED, cluster

from preflight.checks import ALL_CHECKS, reachable


def test_unreachable_hosts_are_left_to_reachable():
    c = cluster(node01={}, node02={}, node03=REFUSED)
    for spec in ALL_CHECKS:
        for f in spec.run(c):
            if spec.name != reachable.NAME:
                assert "node03" not in f.hosts
