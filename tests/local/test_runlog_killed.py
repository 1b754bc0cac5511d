"""Killed runs (a process that is gone) are found and announced once; live ones are not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runlogtools import HOSTS, write_partial

from preflight.history import runlog


def test_killed_runs_are_found_once_and_live_ones_are_not(tmp_path):
    directory = str(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    killed = os.path.join(directory, "20260101T000000-1.jsonl")
    write_partial(killed)
    _set_pid(killed, int(dead.stdout))  # that process has exited: the run was killed
    live = os.path.join(directory, "20260101T000001-2.jsonl")
    write_partial(live)
    _set_pid(live, os.getpid())  # still running (this test)
    done = os.path.join(directory, "20260101T000002-3.jsonl")
    log = runlog.RunLog(done)
    log.start("check", [], HOSTS, 1.0, None)
    log.end("go", 0)
    log.close()
    assert [r.path for r in runlog.killed_runs(directory)] == [killed]
    runlog.mark_killed(killed)
    assert runlog.killed_runs(directory) == []


def _set_pid(path: str, pid: int) -> None:
    lines = Path(path).read_text().splitlines()
    start = json.loads(lines[0])
    start["pid"] = pid
    lines[0] = json.dumps(start, separators=(",", ":"))
    Path(path).write_text("\n".join(lines) + "\n")
