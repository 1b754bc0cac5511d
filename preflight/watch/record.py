"""The watch's results log: JSON lines of every sample as its host sent it and of every
finding as it appears, changes or clears, each line flushed as it is written, so that
nothing a watch has learned is lost when it is killed."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, Optional, TextIO

from preflight.common.statedir import stamped, state_dir
from preflight.model.findings import Finding


def default_path(started: float) -> str:
    """$XDG_STATE_HOME/preflight/watch/<UTC time>-<pid>.jsonl (~/.local/state/...)."""
    return stamped(state_dir("watch"), started)


def finding_doc(f: Finding) -> dict[str, Any]:
    data = {k: v for k, v in f.data.items() if k != "ranks"}
    ranks = [{"host": r.host, "role": r.role, "rank": r.rank, "pid": r.pid}
             for r in f.data.get("ranks", ())]
    return {"check": f.check, "status": f.status.value, "hosts": list(f.hosts),
            "message": f.message, "ranks": ranks, **data}


class Record:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        # A watch that stops before it wrote anything (a bad --plan, an unknown host) leaves
        # no empty log behind: one it created is removed on close (an existing one is kept).
        self._created = not os.path.exists(path)
        self._wrote = False
        self.fh: Optional[TextIO] = open(path, "a", encoding="utf-8")

    def _write(self, text: str) -> None:
        if self.fh is not None:
            self.fh.write(text + "\n")
            self.fh.flush()
            self._wrote = True

    def event(self, kind: str, **fields: Any) -> None:
        self._write(json.dumps({"type": kind, "at": round(time.time(), 3), **fields},
                               default=str))

    def sample(self, host: str, line: str) -> None:
        """The sampler's line as it came (it parsed as JSON: it is written as is)."""
        self._write(f'{{"type":"sample","at":{time.time():.3f},"host":{json.dumps(host)},'
                    f'"sample":{line}}}')

    def findings(self, kind: str, findings: Sequence[Finding]) -> None:
        for f in findings:
            self.event(kind, **finding_doc(f))

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None
            if self._created and not self._wrote:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
