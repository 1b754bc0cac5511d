"""The all-reduce's host commands run on this machine: hostile interpreters never run, the stop
command kills the run's processes and not itself."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import HOSTILE

from preflight.network import allreduce as AR
from preflight.testing.local import LocalRemote


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_interpreter_never_runs_in_the_launch_command(tmp_path, value):
    marker = tmp_path / "marker"
    m = AR.Member("n", LocalRemote("n"), value.format(m=marker), "127.0.0.1")
    run_dir = str(tmp_path / ".preflight-ar-test")
    done = LocalRemote("n").run(AR.host_command(m, 0, [m], AR.AllReduceOptions(), run_dir),
                                timeout=20)
    assert not marker.exists()
    assert done.exit == 95  # no such interpreter: the unpack step stops the command


def test_stop_command_kills_the_runs_processes_and_not_itself(tmp_path):
    run_dir = str(tmp_path / ".preflight-ar-0123abcd")
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               f"{run_dir}/allreduce.py"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                  f"{run_dir}-other/allreduce.py"])
    try:
        done = LocalRemote("n").run(AR.stop_command(run_dir), timeout=10)
        assert done.exit == 0  # the stopping shell survived its own pattern
        assert victim.wait(5) is not None
        assert bystander.poll() is None
    finally:
        for p in (victim, bystander):
            p.kill()
            p.wait()
