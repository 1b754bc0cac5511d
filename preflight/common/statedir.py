"""Where preflight keeps what outlives a run (results logs, watch logs, launch records):
$XDG_STATE_HOME/preflight/<kind>, by default ~/.local/state/preflight/<kind>."""

from __future__ import annotations

import os
import time


def state_dir(kind: str) -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "preflight", kind)


def stamped(directory: str, started: float) -> str:
    """<directory>/<UTC time>-<pid>.jsonl: a new log's name, one per process and second."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started))
    return os.path.join(directory, f"{stamp}-{os.getpid()}.jsonl")
