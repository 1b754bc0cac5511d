"""The sampler's qdisc figures, read over rtnetlink, against iproute2's own `tc -s qdisc` on
this machine's interfaces (a shaper's held-back packets are proven on the rig)."""

from __future__ import annotations

import json
import subprocess

from preflight.hostside.netlink import qdisc_stats


def _tc_roots():
    shown = json.loads(subprocess.run(["tc", "-s", "-j", "qdisc", "show"], check=True,
                                      capture_output=True, text=True, timeout=10).stdout)
    return {q["dev"]: q for q in shown if q.get("root")}


def test_the_root_qdiscs_read_over_netlink_are_those_tc_shows():
    roots = _tc_roots()
    mine = qdisc_stats()
    after = _tc_roots()
    # Interfaces that came or went between the reads (other work on this machine) may be
    # in either; every one there before and after is in ours, and ours are all tc's.
    assert set(roots) & set(after) <= set(mine) <= set(roots) | set(after), (mine, roots)
    for dev, (kind, overlimits, backlog, drops) in mine.items():
        if dev not in roots:
            continue
        q = roots[dev]
        assert kind == q["kind"], (dev, kind, q)
        # Counters read a moment after tc read them: never fewer.
        assert overlimits >= q["overlimits"] and drops >= q["drops"], (dev, mine[dev], q)
        assert isinstance(backlog, int) and backlog >= 0
