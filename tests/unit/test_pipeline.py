"""One check run's stages around the plan (pipeline.py), on facts."""

from __future__ import annotations

from support import G, cluster, link, same, slow_host, survey

from preflight.model.measure import RETEST, NetworkTests
from preflight.model.policy import Policy
from preflight.pipeline import left_out_so_far


def test_the_all_reduce_leaves_out_what_the_checks_so_far_leave_out():
    c = cluster(**same(5))
    names = [o.host.name for o in c.outcomes]
    # node05's links run at a tenth of the others', confirmed alone against node01.
    net = NetworkTests("ring", tuple(names), (
        *survey(names, slow_host("node05", 0.1 * G, 1 * G)),
        link("node05", "node01", 0.1 * G, RETEST), link("node01", "node05", 0.1 * G, RETEST)))
    ips = {o.host.name: o.host.address for o in c.outcomes}
    left = left_out_so_far(Policy(), None, ips, c.outcomes, net)
    assert list(left) == ["node05"]
    assert left["node05"].startswith("bandwidth: node05: slow host")
    healthy = NetworkTests("ring", tuple(names), tuple(survey(names, lambda s, r: 1 * G)))
    assert left_out_so_far(Policy(), None, ips, c.outcomes, healthy) == {}
