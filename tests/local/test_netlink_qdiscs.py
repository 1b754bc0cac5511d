"""The sampler's qdisc figures, read over rtnetlink, against iproute2's own `tc -s qdisc` on
this machine's interfaces (a shaper's held-back packets are proven on the rig)."""

from __future__ import annotations

import json
import subprocess

from preflight.hostside.netlink import qdisc_stats


def test_the_root_qdiscs_read_over_netlink_are_those_tc_shows():
    shown = json.loads(subprocess.run(["tc", "-s", "-j", "qdisc", "show"], check=True,
                                      capture_output=True, text=True, timeout=10).stdout)
    mine = qdisc_stats()
    roots = {q["dev"]: q for q in shown if q.get("root")}
    assert set(mine) == set(roots), (mine, roots)
    for dev, (kind, overlimits, backlog, drops) in mine.items():
        q = roots[dev]
        assert kind == q["kind"], (dev, kind, q)
        # Counters read a moment after tc read them: never fewer.
        assert overlimits >= q["overlimits"] and drops >= q["drops"], (dev, mine[dev], q)
        assert isinstance(backlog, int) and backlog >= 0
