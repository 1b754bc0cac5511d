"""A process under libfaketime that is killed leaves its state in /dev/shm (the simulated hosts
share it with this machine); the testbed removes what such processes left, and nothing of a
process still running or of what was there before."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import time

import pytest

from preflight.testing import testbed

LIB = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")


def state_of(pid: int) -> set[str]:
    return {f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"}


def under_faketime() -> subprocess.Popen[bytes]:
    p = subprocess.Popen(["sleep", "30"], env=dict(os.environ, LD_PRELOAD=LIB[0],
                                                   FAKETIME="+60s"))
    end = time.monotonic() + 5
    while not state_of(p.pid) <= set(os.listdir(testbed.SHM)) and time.monotonic() < end:
        time.sleep(0.02)
    return p


@pytest.mark.skipif(not LIB, reason="libfaketime is not installed")
def test_what_killed_processes_left_is_removed_and_the_living_keep_theirs():
    before = set(os.listdir(testbed.SHM))
    killed, alive = under_faketime(), under_faketime()
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=5)
        assert state_of(killed.pid) <= set(os.listdir(testbed.SHM))  # left behind
        gone = testbed.remove_faketime_leftovers(before)
        assert set(gone) == state_of(killed.pid)
        left = set(os.listdir(testbed.SHM))
        assert not state_of(killed.pid) & left
        assert state_of(alive.pid) <= left
    finally:
        for p in (killed, alive):
            if p.poll() is None:
                p.terminate()
            p.wait(timeout=5)
        for name in state_of(killed.pid) | state_of(alive.pid):
            try:
                os.unlink(os.path.join(testbed.SHM, name))
            except FileNotFoundError:
                pass
