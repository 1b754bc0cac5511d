"""Hosts that share one /tmp (a shared scratch filesystem, several slurmd on one machine): the
all-reduce gives each host a run directory of its own and removes only its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import LINK_RATE, PADDLE_A, require_testbed

from preflight.testing import testbed

pytestmark = pytest.mark.cluster

NAMES = ["scratch1", "scratch2", "scratch3"]


@pytest.fixture(scope="module")
def scratch() -> Iterator[testbed.Testbed]:
    require_testbed()
    tb = testbed.Testbed(len(NAMES), names=NAMES, shared_tmp=True)
    try:
        for name in NAMES:
            tb.throttle(name, LINK_RATE)
        yield tb
    finally:
        tb.close()


def test_the_rig_hosts_really_share_one_tmp(scratch):
    scratch.write_file("scratch1", "/tmp/written-on-scratch1", "x\n")
    marker = os.path.join(scratch.hosts["scratch3"].tmp, "written-on-scratch1")
    assert os.path.exists(marker)
    seen = subprocess.run(scratch.client_cmd(["ssh", "-i", scratch.identity, "-o",
                                              f"UserKnownHostsFile={scratch.known_hosts}",
                                              "-o", "BatchMode=yes",
                                              f"root@{scratch.hosts['scratch2'].address}",
                                              "cat /tmp/written-on-scratch1"]),
                          capture_output=True, text=True, timeout=30)
    os.unlink(marker)
    assert seen.stdout == "x\n", seen.stderr


def test_an_all_reduce_across_hosts_sharing_tmp_runs_and_leaves_nothing(scratch):
    inv = scratch.inventory(os.path.join(scratch.base, "scratch.yaml"), NAMES, python=PADDLE_A)
    report = os.path.join(scratch.base, "report.json")
    p = subprocess.run(scratch.client_cmd([sys.executable, "-m", "preflight", "check", "-i",
                                           inv, "--iperf-seconds", "1", "--iperf-warmup", "0",
                                           "--allreduce-sizes",
                                           "1", "--no-progress", "--json", report]),
                       capture_output=True, text=True, timeout=300, cwd=scratch.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    with open(report) as fh:
        doc = json.load(fh)
    ar = doc["network"]["allreduce"]
    # One directory name for every host made the second host's `mkdir` fail: "could not
    # create the run directory in /tmp".
    assert ar["error"] is None, (ar["error"], ar.get("failed"))
    assert ar["ranks"] == len(NAMES) and ar["sizes"], ar
    assert p.returncode == 0, p.stdout + p.stderr
    assert scratch.leftovers() == {}
