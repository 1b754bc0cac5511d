"""A test run ended from outside (a CI job's timeout, a session's end: SIGTERM) tears its
simulated hosts down as a Ctrl-C does: no namespace, process or directory of theirs left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from preflight.testing.testbed import remove_remains

pytestmark = pytest.mark.cluster

TESTS = Path(__file__).resolve().parent.parent

A_RUN = '''\
import os, time
import pytest
from preflight.testing.testbed import Testbed

@pytest.fixture
def tb():
    with Testbed(1) as t:
        with open(os.environ["TESTBED_MARK"], "w") as fh:
            fh.write(t.id + " " + t.base)
        yield t

def test_runs_until_stopped(tb):
    time.sleep(120)
'''


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_a_run_stopped_with_a_signal_removes_its_simulated_hosts(tmp_path, sig):
    (tmp_path / "test_a_run.py").write_text(A_RUN)
    mark = tmp_path / "mark"
    env = dict(os.environ, PYTHONPATH=str(TESTS), TESTBED_MARK=str(mark))
    # The project's conftest, as in every run: its handlers are what is tested.
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "conftest", "-q",
                            "-p", "no:cacheprovider", "test_a_run.py"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not (mark.exists() and mark.read_text()):
            assert run.poll() is None, run.communicate()[0]
            time.sleep(0.2)
        tb_id, base = mark.read_text().split()
        assert any(ns.startswith(f"pf{tb_id}-") for ns in _namespaces())
        run.send_signal(sig)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
        # What the run left, had it not torn its testbed down (the test then fails below).
        left = remove_remains(mark.read_text().split()[0]) if mark.exists() else []
    assert run.returncode == 2, out  # interrupted, as by Ctrl-C
    assert left == [], out
    assert not os.path.exists(base)


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]
