"""The watch in a terminal, in the style of `check`: one line a finding (its status, check,
hosts as a hostlist, message), printed when it appears or its status changes and once more
when it clears; nothing while nothing changes."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, TextIO

from preflight.common.secrets import hide
from preflight.common.units import hostlist
from preflight.common.visible import visible
from preflight.model.findings import Finding, Status
from preflight.model.watch import blame_of

HOSTS_W = 22


Key = tuple[str, tuple[str, ...], tuple[int, ...]]


def key(f: Finding) -> Key:
    """What tells a finding from another: its check, its hosts and the ranks it blames (two
    ranks of one host may each be named)."""
    return key_of(f.check, f.hosts, (r.pid for r in blame_of(f).ranks))


def record_key(rec: Mapping[str, Any]) -> Key:
    """key() of a finding as the results log wrote it (its 'ranks', each with its pid)."""
    return key_of(str(rec.get("check")), tuple(rec.get("hosts") or ()),
                  (int(r["pid"]) for r in rec.get("ranks") or ()
                   if isinstance(r, dict) and isinstance(r.get("pid"), int)))


def key_of(check: str, hosts: tuple[str, ...], pids: Iterable[int]) -> Key:
    return check, hosts, tuple(sorted(pids))


def line(f: Finding, width: int = 0, status: str = "", at: Optional[float] = None) -> str:
    """The finding's line, stamped with the wall clock's time of day (now, or at), its
    secrets hidden (common/secrets.py), what hosts said in it terminal-safe
    (common/visible.py)."""
    text = (f"{time.strftime('%H:%M:%S', time.localtime(at))}  "
            f"{status or f.status.value:<8} {f.check:<10} "
            f"{hostlist(list(f.hosts)):<{HOSTS_W}} {visible(hide(f.message))}")
    return text if width <= 0 or len(text) <= width else text[:width - 3] + "..."


class Live:
    """What the terminal shows so far; update() prints only the changes, and a job's pass
    line again once repeat_s has passed since it was printed (what its time went to moves on
    while nothing else changes)."""

    def __init__(self, out: TextIO, width: int, repeat_s: Optional[float] = None) -> None:
        self.out, self.width, self.repeat_s = out, width, repeat_s
        self.shown: dict[Key, Finding] = {}
        self.printed: dict[Key, float] = {}  # when each line shown was printed last

    def update(self, findings: Sequence[Finding], at: Optional[float] = None
               ) -> tuple[list[Finding], list[Finding]]:
        """Prints and returns (the findings new or changed in status, those cleared), stamped
        now, or at (a judgement replayed)."""
        now = {key(f): f for f in findings}
        new = [f for k, f in now.items()
               if k not in self.shown or self.shown[k].status is not f.status]
        cleared = [f for k, f in self.shown.items() if k not in now]
        when = time.time() if at is None else at
        again = [] if self.repeat_s is None else [
            f for k, f in now.items() if k in self.shown and f.check == "progress"
            and f.status is Status.PASS and self.shown[k].status is Status.PASS
            and when - self.printed.get(k, when) >= self.repeat_s]
        for f in new + again:
            self.out.write(line(f, self.width, at=at) + "\n")
            self.printed[key(f)] = when
        for f in cleared:
            if f.status not in (Status.PASS, Status.SKIP):
                self.out.write(line(f, self.width, "cleared", at) + "\n")
        self.out.flush()
        self.shown = now
        self.printed = {k: t for k, t in self.printed.items() if k in now}
        return new, cleared
