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


def record(token: str, plan: str, hosts: Sequence[str]) -> Optional[str]:
    """Writes the launch's record; returns its path, None where none could be written (the
    job runs all the same: a watch can still be given its marker)."""
    d = directory()
    path = os.path.join(d, f"{token}.json")
    try:
        os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"token": token, "plan": os.path.abspath(plan), "hosts": list(hosts),
                       "started": time.time()}, fh)
        for old in sorted(_records(d), key=os.path.getmtime)[:-KEEP]:
            os.unlink(old)
    except OSError:
        return None
    return path


def _records(d: str) -> list[str]:
    try:
        return [os.path.join(d, n) for n in os.listdir(d) if n.endswith(".json")]
    except OSError:
        return []


def newest(plan: str) -> Optional[Launched]:
    """The newest launch of the report at plan; None when it was never launched here."""
    want = os.path.abspath(plan)
    found: list[Launched] = []
    for path in _records(directory()):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            if doc.get("plan") == want:
                found.append(Launched(str(doc["token"]), want,
                                      tuple(str(h) for h in doc.get("hosts", ())),
                                      float(doc.get("started", 0))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # a record half written or of another shape: not this plan's
    return max(found, key=lambda x: x.started) if found else None
