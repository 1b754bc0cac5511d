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

from preflight.common.statedir import state_dir
from preflight.model.watch import LaunchFailure

KEEP = 50  # records kept; older ones are removed as new ones come


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


def record(token: str, plan: str, hosts: Sequence[str], script: Sequence[str] = (),
           chdir: Optional[str] = None, timeout: Optional[float] = None,
           transport: str = "ssh", jobid: Optional[str] = None) -> Optional[str]:
    """Writes the launch's record; returns its path, None where none could be written (the
    job runs all the same: a watch can still be given its marker)."""
    d = directory()
    path = os.path.join(d, f"{token}.json")
    try:
        os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"token": token, "plan": os.path.abspath(plan), "hosts": list(hosts),
                       "started": time.time(), "script": list(script), "chdir": chdir,
                       "timeout": timeout, "transport": transport, "jobid": jobid}, fh)
        for old in sorted(_records(d), key=os.path.getmtime)[:-KEEP]:
            os.unlink(old)
    except OSError:
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
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)  # a reader sees the old record or the new, never half of one
    except (OSError, ValueError):
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
            None if doc.get("jobid") is None else str(doc["jobid"]), _failure(doc.get("failed")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def newest(plan: str) -> Optional[Launched]:
    """The newest launch of the report at plan; None when it was never launched here."""
    want = os.path.abspath(plan)
    found = [x for x in map(_read, _records(directory())) if x is not None and x.plan == want]
    return max(found, key=lambda x: x.started) if found else None


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
