"""The stop of a launched job's processes by the marker in their environment, run here as a
host runs it: every marked process ends (TERM, then KILL past the wait), no other does, the
count is said, and the wait is counted on the clock, not in scans of /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from preflight.network.paddle_job import stop_marked

ENTRY = "PREFLIGHT_LAUNCH=0123456789abcdef"


def _spawn(body: str, marked: bool) -> subprocess.Popen[bytes]:
    env = dict(os.environ, **({"PREFLIGHT_LAUNCH": "0123456789abcdef"} if marked else {}))
    return subprocess.Popen(["sh", "-c", body], env=env, start_new_session=True)


def test_the_marked_processes_end_past_a_term_they_ignore_and_no_other_does():
    polite = _spawn("exec sleep 60", True)
    stubborn = _spawn(f"exec {sys.executable} -c 'import signal, time; "
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'", True)
    other = _spawn("exec sleep 60", False)
    near = _spawn("exec sleep 60", False)
    try:
        time.sleep(0.3)  # their environments in place
        start = time.monotonic()
        done = subprocess.run(stop_marked(ENTRY, 1.0), shell=True, capture_output=True,
                              text=True, timeout=30)
        took = time.monotonic() - start
        assert done.returncode == 0 and done.stdout.split()[-2:] == ["stopped", "2"], done
        assert polite.wait(5) is not None and stubborn.wait(5) is not None
        assert other.poll() is None and near.poll() is None  # unmarked: left alone
        # TERM ignored: KILLed once the wait (a second, on the clock) is over, not scans later.
        assert took < 10, took
    finally:
        for p in (polite, stubborn, other, near):
            if p.poll() is None:
                p.kill()
                p.wait(5)


def test_nothing_marked_is_said_as_none_stopped_at_once():
    start = time.monotonic()
    done = subprocess.run(stop_marked("PREFLIGHT_LAUNCH=ffffffffffffffff", 5.0), shell=True,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.split()[-2:] == ["stopped", "0"], done
    assert time.monotonic() - start < 5  # no wait where nothing was found
