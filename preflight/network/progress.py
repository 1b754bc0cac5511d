"""What each host's ranks of the all-reduce have done so far, and what a run that did not end
by itself was waiting for (pure: the controller in allreduce.py polls, this reads and judges).

A host prints its status (status_script) while the run goes on and once more when its
launcher ends: the host's clock, whether its launcher reached the rendezvous, each local
rank's progress events (hostside/allreduce.py) and the time of its last heartbeat. Ages are
taken on the host's own clock, so clock skew between hosts and the controller does not count.

A run that did not end by itself is one of:
- never-joined: some hosts are behind the others on the way to the rendezvous (no launcher,
  no worker, Paddle still importing) when nothing has progressed for the launch's idle window:
  those are named;
- stalled: after the rendezvous, a rank's heartbeat stopped while the others' go on: that
  rank's host is named (the others are waiting for it inside the collective);
- slow: at the deadline collectives still complete, only slower than the links predicted;
- stall: nothing completes and nobody can be blamed: one finding for the cluster;
- out of time: the run reached its own time limit while it still progressed (imports, a large
  rendezvous): the limit's finding, not the cluster's."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from preflight.model.measure import BACKENDS, Backend

NOW, LAUNCHER, PROGRESS, BEAT = ("PREFLIGHT-NOW ", "PREFLIGHT-LAUNCHER",
                                 "PREFLIGHT-PROGRESS ", "PREFLIGHT-BEAT ")
# The launcher prints this when it starts waiting for its peers (Paddle 2.6 and 3.x).
LAUNCHER_WAITING = "Waiting peer start"
STALE_S = 10.0  # a rank whose heartbeat (every second) is this old is not running
# Stages on the way to the rendezvous, furthest last.
NOTHING, LAUNCHER_UP, STARTED, AT_RENDEZVOUS, JOINED = range(5)
STAGE_TEXT = {NOTHING: "its launcher never reached the rendezvous",
              LAUNCHER_UP: "its launcher waited for peers but started no worker",
              STARTED: "its worker was still starting (importing Paddle)",
              AT_RENDEZVOUS: "its worker waited at the rendezvous"}


def status_script(run_dir: str) -> str:
    """Returns the shell lines that print a host's status for run_dir (quoted)."""
    d = shlex.quote(run_dir)
    return "\n".join([
        f"if cd {d} 2>/dev/null; then",
        f"  echo {shlex.quote(NOW)}$(date +%s)",
        f"  grep -q {shlex.quote(LAUNCHER_WAITING)} launch.log 2>/dev/null && echo {LAUNCHER}",
        # echo: a line still being written has no newline yet; it must not swallow the next
        "  for f in progress.*; do [ -f \"$f\" ] && "
        f"sed \"s/^/{PROGRESS}${{f#progress.}} /\" \"$f\" && echo; done",
        "  for f in beat.*; do case $f in *.tmp) continue;; esac; [ -f \"$f\" ] && "
        f"echo \"{BEAT}${{f#beat.}} $(cat \"$f\")\"; done",
        "  cd /",
        "fi",
    ])


@dataclass(frozen=True)
class RankProgress:
    """One local rank, on its host's clock (seconds since the epoch)."""

    local: str
    started: Optional[float] = None
    init: Optional[float] = None
    joined: Optional[float] = None
    rank: Optional[int] = None
    world: Optional[int] = None
    backend: Optional[Backend] = None
    ops: int = 0
    last_event: Optional[float] = None
    sizes: tuple[tuple[int, float], ...] = ()  # (bytes, median seconds), as they finished
    done: bool = False
    beat: Optional[float] = None
    sockets: Optional[int] = None  # connected at its last beat, at the rendezvous (None: unknown)

    @property
    def stage(self) -> int:
        return (JOINED if self.joined is not None else AT_RENDEZVOUS if self.init is not None
                else STARTED)


@dataclass(frozen=True)
class HostProgress:
    now: float  # the host's clock when it printed this
    launcher_waiting: bool
    ranks: tuple[RankProgress, ...]

    def stage(self, nproc: int) -> int:
        """How far the host's furthest-behind rank got."""
        if len(self.ranks) < nproc:
            return LAUNCHER_UP if self.launcher_waiting or self.ranks else NOTHING
        return min(r.stage for r in self.ranks)

    def beat_age(self, r: RankProgress) -> Optional[float]:
        return None if r.beat is None else max(0.0, self.now - r.beat)

    def idle_s(self) -> Optional[float]:
        """Seconds since the last thing any of its ranks did."""
        last = [r.last_event for r in self.ranks if r.last_event is not None]
        return max(0.0, self.now - max(last)) if last else None

    @property
    def ops(self) -> int:
        return min((r.ops for r in self.ranks), default=0)


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _rank(local: str, events: Sequence[Mapping[str, Any]],
          beat: tuple[Optional[float], Optional[int]]) -> RankProgress:
    r: dict[str, Any] = {"local": local, "beat": beat[0], "sockets": beat[1]}
    sizes: list[tuple[int, float]] = []
    for ev in events:
        t = _num(ev.get("t"))
        kind = ev.get("e")
        if t is not None:
            r["last_event"] = max(t, r.get("last_event") or t)
        if kind == "start":
            r["started"] = t
        elif kind == "init":
            r["init"] = t
        elif kind == "join":
            r["joined"] = t
            r["rank"] = ev.get("rank") if isinstance(ev.get("rank"), int) else None
            r["world"] = ev.get("world") if isinstance(ev.get("world"), int) else None
            r["backend"] = ev.get("backend") if ev.get("backend") in BACKENDS else None
        elif kind == "op" and isinstance(ev.get("n"), int):
            r["ops"] = max(r.get("ops", 0), ev["n"])
        elif kind == "size":
            nbytes, secs = ev.get("bytes"), _num(ev.get("seconds"))
            if isinstance(nbytes, int) and secs is not None and secs > 0:
                sizes.append((nbytes, secs))
        elif kind == "done":
            r["done"] = True
    return RankProgress(sizes=tuple(sizes), **r)


def parse_status(text: str) -> Optional[HostProgress]:
    """Returns a host's status from what status_script printed; None when it printed none
    (the run directory is gone or was never made). A line cut short mid-write is skipped."""
    now: Optional[float] = None
    waiting = False
    events: dict[str, list[Mapping[str, Any]]] = {}
    beats: dict[str, tuple[Optional[float], Optional[int]]] = {}
    for ln in text.splitlines():
        if ln.startswith(NOW):
            now = _num(_float(ln[len(NOW):]))
        elif ln.strip() == LAUNCHER:
            waiting = True
        elif ln.startswith(PROGRESS):
            local, _, body = ln[len(PROGRESS):].partition(" ")
            try:
                ev = json.loads(body)
            except ValueError:
                continue
            if isinstance(ev, dict):
                events.setdefault(local, []).append(ev)
        elif ln.startswith(BEAT):
            local, _, rest = ln[len(BEAT):].partition(" ")
            t, _, socks = rest.strip().partition(" ")
            b = _float(t)
            if b is not None:
                n = _float(socks) if socks else None
                beats[local] = (b, int(n) if n is not None and n >= 0 else None)
    if now is None:
        return None
    ranks = tuple(_rank(k, events.get(k, []), beats.get(k, (None, None)))
                  for k in sorted(set(events) | set(beats)))
    return HostProgress(now, waiting, ranks)


def _float(s: str) -> Optional[float]:
    try:
        return float(s.strip())
    except ValueError:
        return None


def all_joined(progress: Mapping[str, Optional[HostProgress]], nproc: Mapping[str, int]
               ) -> bool:
    return all(p is not None and p.stage(nproc[h]) == JOINED for h, p in progress.items())


def all_done(progress: Mapping[str, Optional[HostProgress]], nproc: Mapping[str, int]) -> bool:
    return all(p is not None and len(p.ranks) >= nproc[h] and all(r.done for r in p.ranks)
               for h, p in progress.items())


def behind(progress: Mapping[str, Optional[HostProgress]], nproc: Mapping[str, int]
           ) -> dict[str, str]:
    """Returns {host: how far it got} for the hosts furthest behind on the way to the
    rendezvous, when some got further: those kept the others waiting. Empty when every host
    got as far (nobody to blame) or every host joined."""
    stages = {h: (p.stage(nproc[h]) if p is not None else NOTHING)
              for h, p in progress.items()}
    if not stages or min(stages.values()) == max(stages.values()):
        return {}
    low = min(stages.values())
    return {h: STAGE_TEXT[s] if progress[h] is not None else
            "no answer from it about the run" for h, s in stages.items() if s == low}


def stale(progress: Mapping[str, Optional[HostProgress]]) -> dict[str, str]:
    """Returns {host: why} for hosts with a rank whose heartbeat stopped while another rank
    still beats (they wait for it); empty otherwise: when every heartbeat stopped, the
    controller cannot tell who stopped first.
    A rank still importing Paddle is not judged by its heartbeat: importing Paddle holds the
    GIL for long stretches, and the beat thread waits for it. Measured on 2 cores (Paddle
    3.3.1), the beat thread's longest silence: 0.3 s importing alone, 2.1-3.5 s with 16
    importing at once, 13-23.5 s with 32 (while 16 pure-Python loops at once leave it 0.05 s).
    Such a rank is judged by the launch's progress instead (decide: never joined)."""
    old: dict[str, str] = {}
    fresh = False
    for h, p in progress.items():
        if p is None:
            continue
        for r in p.ranks:
            age = p.beat_age(r)
            if age is None or r.done or r.stage == STARTED:
                continue
            if age <= STALE_S:
                fresh = True
                continue
            where = (f"after {r.ops} collective(s)" if r.joined is not None
                     else "at the rendezvous")
            name = f"rank {r.rank}" if r.rank is not None else f"local rank {r.local}"
            old.setdefault(h, f"{name} stopped: no heartbeat for {age:.0f} s {where}, while "
                              "the other ranks waited for it")
    return old if fresh else {}


def marks(progress: Mapping[str, Optional[HostProgress]], nproc: Mapping[str, int]
          ) -> dict[tuple[str, ...], int]:
    """Returns how far the run got, as counts that only grow while it moves on: each host's
    stage, and each rank's collectives and connected sockets (the rendezvous connecting its
    mesh).
    The controller keeps the highest of each: a count that rises is progress, one that only
    comes and goes (a connection retried) is not."""
    out: dict[tuple[str, ...], int] = {}
    for h, p in progress.items():
        if p is None:
            continue
        out[(h,)] = p.stage(nproc.get(h, 1))
        for r in p.ranks:
            out[(h, r.local, "ops")] = r.ops
            if r.sockets is not None:
                out[(h, r.local, "sockets")] = r.sockets
    return out


def idle_s(progress: Mapping[str, Optional[HostProgress]]) -> Optional[float]:
    """Returns the seconds since the last collective completed anywhere (None: unknown)."""
    idle = [i for p in progress.values() if p is not None for i in [p.idle_s()]
            if i is not None]
    return min(idle) if idle else None


def rank0(progress: Mapping[str, Optional[HostProgress]]) -> Optional[RankProgress]:
    return next((r for p in progress.values() if p is not None for r in p.ranks
                 if r.rank == 0), None)


def summary(p: Optional[HostProgress], nproc: int) -> str:
    """Returns what a host's ranks did, in a few words, for the report."""
    if p is None:
        return "no status"
    stage = p.stage(nproc)
    if stage < JOINED:
        return STAGE_TEXT[stage].replace("its ", "", 1)
    done = all(r.done for r in p.ranks)
    return f"joined; {p.ops} collective(s) done" + ("; finished" if done else "")
