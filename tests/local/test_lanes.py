"""The suite's lanes (tests/lanes.py): a worker's share of the CPUs, held by what it starts
(in another network namespace too, as a simulated host's sshd is), and removed after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lanes
import pytest

from preflight.testing import testbed


@pytest.mark.parametrize("index, count, cpus, share", [
    (0, 2, [0, 1], [0]), (1, 2, [0, 1], [1]),
    (0, 2, [0, 1, 2, 3, 4], [0, 1]), (1, 2, [0, 1, 2, 3, 4], [2, 3, 4]),
    (0, 1, [0, 1], [0, 1]),  # one lane: every CPU
    (1, 3, [0, 1], [0, 1]),  # more lanes than CPUs: each may use them all
], ids=["first-of-2", "second-of-2", "first-of-5-cpus", "last-takes-the-rest", "one-lane",
        "fewer-cpus-than-lanes"])
def test_each_lane_gets_its_share_of_the_cpus(index, count, cpus, share):
    assert lanes.share(index, count, cpus) == share


# Enters lane 1 of 2, starts a process in a new network namespace (as a simulated host's sshd
# is started), reads where both may run, leaves.
IN_A_LANE = """\
import json, os, subprocess, sys
import lanes
with open(os.path.join(lanes.CPUSET, "cgroup.procs"), "w") as fh:  # as a worker starts
    fh.write(str(os.getpid()))
machine = sorted(os.sched_getaffinity(0))
path = lanes.enter(1, 2)
child = subprocess.run(["unshare", "--net", "--", sys.executable, "-c",
                        "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, timeout=30)
out = {"path": path, "current": lanes.current(), "machine": machine,
       "own": sorted(os.sched_getaffinity(0)),
       "child": child.stdout.strip(), "err": child.stderr[-500:]}
lanes.leave(path)
out["after"] = sorted(os.sched_getaffinity(0))
print(json.dumps(out))
"""


def test_a_lane_holds_what_its_worker_starts_and_is_removed_after():
    if os.geteuid() != 0 or testbed.can_run():
        pytest.skip("needs root and a cgroup v1 cpuset (CI has both)")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-c", IN_A_LANE], capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    want = lanes.share(1, 2, out["machine"])
    assert len(out["machine"]) >= 2 and 0 < len(want) < len(out["machine"]), out
    assert out["own"] == want and out["child"] == str(want), out
    assert out["path"] is not None and out["current"] == out["path"], out
    assert not os.path.exists(out["path"])  # removed, its worker moved back
    assert out["after"] == out["machine"], out
