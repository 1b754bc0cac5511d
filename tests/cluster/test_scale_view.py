"""64 simulated hosts sharing one fault: the terminal view stays readable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import require_testbed

from preflight.testing import testbed

pytestmark = pytest.mark.cluster

N_HOSTS = 64
COLUMNS = 80
NAMES = [f"gpu{i:02d}" for i in range(1, N_HOSTS + 1)]


@pytest.fixture(scope="module")
def wide() -> Iterator[testbed.Testbed]:
    require_testbed()
    tb = testbed.Testbed(N_HOSTS, names=NAMES)
    try:
        yield tb
    finally:
        tb.close()


def test_a_64_host_no_go_with_one_shared_fault_fits_in_40_lines(wide):
    # Every host's training interpreter is missing: one fault, 64 times.
    inv = wide.inventory(os.path.join(wide.base, "wide.yaml"), NAMES,
                         python="/nonexistent/bin/python")
    env = dict(os.environ, PYTHONSAFEPATH="1", COLUMNS=str(COLUMNS))
    p = subprocess.run(wide.client_cmd([sys.executable, "-m", "preflight", "check", "-i", inv,
                                        "--no-network-tests", "--cpu-sample", "0.1",
                                        "--no-log"]),
                       capture_output=True, text=True, timeout=300, cwd=wide.base, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) <= 40, p.stdout
    assert max(len(ln) for ln in lines) <= COLUMNS, p.stdout
    # The fault is one line naming every host as a hostlist, not 64 lines.
    fault = [ln for ln in lines if ln.startswith("fail ")]
    # (The hosts column is as wide as the widest hosts of any line: the pass lines' vary.)
    assert len(fault) == 1 and re.search(r"paddle-stack +gpu\[01-64\] +Paddle not importable",
                                         fault[0]), fault
    assert lines[-1].startswith("NO-GO: 1 failed on 64 hosts: "), lines[-1]
    assert "left out gpu[01-64]: " in p.stdout  # the plan's left-out hosts, grouped too
