"""The watch's results log: JSON lines of the samples as their hosts sent them and of every
finding as it appears, changes or clears, each line flushed as it is written, so that
nothing a watch has learned is lost when it is killed.

The log stays bounded: every finding, action and event is kept, and every sample while the
samples written stay under half their budget (--log-max-mb); past that, a host's samples are
kept one in 2, past three quarters one in 4, and so on, each change said in the log
("thinned"); past the budget, none but those that must be (below). Samples are counters
(totals so far), so the rates between those kept still read right. Kept whatever the stride,
below the budget: a host's first sample, one with a launcher, rank or exit the log has not
seen (what the replay needs to tell whose samples follow), one the sampler could not read
whole, and the samples of a host an open finding names (the fault, as it happened). Past the
budget, only the first kinds (what the replay needs, exits), up to one MiB more."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, Optional, TextIO

from preflight.common import safewrite
from preflight.common.secrets import scrub
from preflight.common.statedir import stamped, state_dir
from preflight.model.findings import Finding
from preflight.model.watch import blame_of
from preflight.watch.samples import Tick

# --log-max-mb's default: 1,000 hosts of 8 ranks (about 4 KB a host's sample, every 5 s)
# write half of it in about 11 minutes, then thinned.
SAMPLES_MAX_BYTES = 1 << 30


def stride(written: int, budget: int) -> int:
    """Keep one sample in this many (a host's), with `written` bytes of samples in the log;
    0: none but those that must be. 1 while under half the budget, 2 under three quarters,
    4 under seven eighths, ..."""
    if budget <= 0:
        return 1  # no budget: every sample
    if written >= budget:
        return 0
    every, bar = 1, budget / 2
    while written >= budget - bar and every < 1 << 20:
        every, bar = every * 2, bar / 2
    return every


def default_path(started: float) -> str:
    """$XDG_STATE_HOME/preflight/watch/<UTC time>-<pid>.jsonl (~/.local/state/...)."""
    return stamped(state_dir("watch"), started)


def finding_doc(f: Finding) -> dict[str, Any]:
    """A finding as the log keeps it: whom it blames (the cause, its ranks, the links of its
    pairs, its job, the error a rank ended with) beside its figures."""
    blame = blame_of(f)
    ranks = [r.doc() for r in blame.ranks]
    said = {"cause": blame.cause if blame.cause != "none" else None,
            "pairs": [list(p) for p in blame.pairs], "job": blame.job, "error": blame.error}
    return {"check": f.check, "status": f.status.value, "hosts": list(f.hosts),
            "message": f.message, "ranks": ranks,
            **{k: v for k, v in said.items() if v}, **f.data}


class Record:
    def __init__(self, path: str, samples_max_bytes: int = SAMPLES_MAX_BYTES) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self.budget = samples_max_bytes
        # A log appended to counts what it holds already against the budget.
        self.written = os.path.getsize(path) if os.path.exists(path) else 0
        self.every = 1
        self.seen: dict[str, set[int]] = {}  # host -> the pids (launchers, ranks) logged
        self.count: dict[str, int] = {}  # host -> its samples so far, kept or not
        self.named: set[str] = set()  # the hosts the open findings name
        # A watch that stops before it wrote anything (a bad --plan, an unknown host) leaves
        # no empty log behind: one it created is removed on close (an existing one is kept).
        self._created = not os.path.exists(path)
        self._wrote = False
        self.fh: Optional[TextIO] = safewrite.open_append(path)

    def _write(self, text: str) -> None:
        if self.fh is not None:
            self.fh.write(text + "\n")
            self.fh.flush()
            self._wrote = True

    def event(self, kind: str, **fields: Any) -> None:
        """A record of the watch's own (its start, a finding, an act): its secrets hidden
        (a sample's were hidden as it was read: samples.HostStream)."""
        self._write(json.dumps({"type": kind, "at": round(time.time(), 3),
                                **scrub(fields)}, default=str))

    def sample(self, host: str, line: str, tick: Optional[Tick] = None) -> None:
        """The sampler's line as it came (it parsed as JSON: it is written as is), unless
        the log thins its samples now (tick: what the line said; None: it is kept)."""
        every = stride(self.written, self.budget)
        if every != self.every:
            self.every = every
            self.event("thinned", every=every or None, samples_bytes=self.written,
                       budget_bytes=self.budget)
        n = self.count[host] = self.count.get(host, -1) + 1
        if tick is not None and not self._keep(host, tick, n, every):
            return
        text = (f'{{"type":"sample","at":{time.time():.3f},"host":{json.dumps(host)},'
                f'"sample":{line}}}')
        self._write(text)
        self.written += len(text) + 1

    def _keep(self, host: str, tick: Tick, n: int, every: int) -> bool:
        seen = self.seen.setdefault(host, set())
        pids = {x.pid for x in tick.launchers} | {rid.pid for rid, _ in tick.ranks}
        new = bool(pids - seen or tick.gone or tick.oom or tick.error or n == 0)
        seen |= pids
        if every == 0:
            return new and self.written < self.budget + (1 << 20)  # a last MiB for exits
        return new or host in self.named or n % every == 0

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
