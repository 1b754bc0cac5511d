"""The jobs `preflight launch` started, each recorded as a small JSON file (its marker, the
report whose plan it runs, its hosts) where `preflight watch --plan` finds the newest one of
that plan: the watch then follows that job's processes and no other."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.common import safewrite
from preflight.common.statedir import state_dir
from preflight.model.watch import LaunchFailure

KEEP = 50  # records kept; older ones are removed as new ones come
# How long `watch --act` waits for the record of a launch started just before it.
LAUNCH_WAIT_S = 30.0


def directory() -> str:
    """$XDG_STATE_HOME/preflight/launches (~/.local/state/preflight/launches)."""
    return state_dir("launches")


@dataclass(frozen=True)
class Launched:
    token: str
    plan: str  # the report's absolute path
    hosts: tuple[str, ...]
    started: float
    # How it was launched, for `watch --act` to launch it again: the training script and
    # its arguments, launch's --chdir, --timeout and --transport.
    script: tuple[str, ...] = ()
    chdir: Optional[str] = None
    timeout: Optional[float] = None
    transport: str = "ssh"
    jobid: Optional[str] = None  # the Slurm batch job it runs as (--transport slurm)
    failed: Optional[LaunchFailure] = None  # the first host whose launcher failed
    # The `preflight launch` process that runs the job (it lives as long as the job does)
    # and its start time (/proc: a pid used again since is another process); None: a record
    # of an earlier version, taken as running.
    pid: Optional[int] = None
    pid_start: Optional[int] = None

    def runs(self) -> bool:
        """Whether its launch still runs on this machine (so its job does)."""
        return self.pid is None or (self.pid_start is not None
                                    and _started(self.pid) == self.pid_start)


def record(token: str, plan: str, hosts: Sequence[str], script: Sequence[str] = (),
           chdir: Optional[str] = None, timeout: Optional[float] = None,
           transport: str = "ssh", jobid: Optional[str] = None) -> Optional[str]:
    """Writes the launch's record; returns its path, None where none could be written (the
    job runs all the same: a watch can still be given its marker)."""
    d = directory()
    path = os.path.join(d, f"{token}.json")
    try:
        os.makedirs(d, exist_ok=True)
        safewrite.write_text(path, json.dumps({
            "token": token, "plan": os.path.abspath(plan), "hosts": list(hosts),
            "started": time.time(), "script": list(script), "chdir": chdir,
            "timeout": timeout, "transport": transport, "jobid": jobid,
            "pid": os.getpid(), "pid_start": _started(os.getpid())}), 0o600)
        for old in sorted(_records(d), key=os.path.getmtime)[:-KEEP]:
            os.unlink(old)
    except (OSError, safewrite.UnsafeWrite):
        return None
    return path


def failed(token: str, host: str, why: str) -> None:
    """Adds to the launch's record the host whose launcher failed first (before the launch
    stops the job everywhere, so that a watch sees it before it sees the job end); later
    failures, of hosts the stop ended, are not recorded. Best effort, as the record."""
    path = os.path.join(directory(), f"{token}.json")
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if not isinstance(doc, dict) or doc.get("failed"):
            return
        doc["failed"] = {"host": host, "why": why, "at": time.time()}
        # A reader sees the old record or the new, never half of one.
        safewrite.write_text(path, json.dumps(doc), 0o600)
    except (OSError, ValueError, safewrite.UnsafeWrite):
        return


def _records(d: str) -> list[str]:
    try:
        return [os.path.join(d, n) for n in os.listdir(d) if n.endswith(".json")]
    except OSError:
        return []


def _read(path: str) -> Optional[Launched]:
    """A launch record; None where it is half written or of another shape."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        timeout = doc.get("timeout")
        return Launched(
            str(doc["token"]), str(doc["plan"]), tuple(str(h) for h in doc.get("hosts", ())),
            float(doc.get("started", 0)), tuple(str(a) for a in doc.get("script") or ()),
            None if doc.get("chdir") is None else str(doc["chdir"]),
            None if timeout is None else float(timeout), str(doc.get("transport") or "ssh"),
            None if doc.get("jobid") is None else str(doc["jobid"]), _failure(doc.get("failed")),
            _int(doc.get("pid")), _int(doc.get("pid_start")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def newest(plan: str) -> Optional[Launched]:
    """The newest launch of the report at plan; None when it was never launched here."""
    found = _of(plan)
    return max(found, key=lambda x: x.started) if found else None


def running(plan: str, wait_s: float = 0.0, poll_s: float = 0.5) -> Optional[Launched]:
    """The newest launch of the report at plan whose job still runs; waiting up to wait_s
    for one (`preflight launch ... &` then at once `preflight watch`: the launch writes its
    record once its launchers start). None where none runs by then."""
    end = time.monotonic() + wait_s
    while True:
        found = [x for x in _of(plan) if x.runs()]
        if found:
            return max(found, key=lambda x: x.started)
        if time.monotonic() >= end:
            return None
        time.sleep(poll_s)


def _of(plan: str) -> list[Launched]:
    """Every launch recorded of the report at plan."""
    want = os.path.abspath(plan)
    return [x for x in map(_read, _records(directory())) if x is not None and x.plan == want]


def _started(pid: int) -> Optional[int]:
    """The process's start time (clock ticks after boot, /proc/PID/stat); None where it is
    gone or cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _int(v: object) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def by_token(token: str) -> Optional[Launched]:
    """The launch recorded with this marker; None when none is."""
    if not token.isalnum():  # a marker is hex: anything else names no record
        return None
    path = os.path.join(directory(), f"{token}.json")
    return _read(path) if os.path.isfile(path) else None


def _failure(doc: object) -> Optional[LaunchFailure]:
    if not isinstance(doc, dict):
        return None
    return LaunchFailure(str(doc["host"]), str(doc["why"]), float(doc["at"]))
