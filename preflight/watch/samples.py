"""What a host's sampler printed, as types: one Tick a line. A HostStream keeps what the
sampler says once (who a rank is, a launcher's command line) for the lines after it."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Optional

from preflight.common.secrets import may_hold_secret, scrub
from preflight.model.watch import GpuSample, HostSample, RankId, RankSample, Role

SCHEMA = 1


class BadSample(ValueError):
    """A line that is not a sample of this schema."""


@dataclass(frozen=True)
class Launcher:
    """A Paddle launcher on a host: the job it belongs to (its --master, else its --servers,
    else its --job_id: the same on every host of one job) and its log directory."""

    host: str
    pid: int
    job: str
    argv: tuple[str, ...]
    log_dir: str
    netns: Optional[str] = None  # its network namespace ("net:[inode]")


@dataclass(frozen=True)
class Tick:
    host: str
    n: int
    sample: HostSample
    ranks: tuple[tuple[RankId, RankSample], ...]
    gone: tuple[tuple[RankId, tuple[str, ...]], ...]  # ranks exited, with their logs' tails
    launchers: tuple[Launcher, ...]  # those seen for the first time
    error: Optional[str] = None  # a part of the sample the sampler could not read
    netns: Optional[str] = None  # the sampler's own network namespace
    line: str = ""  # the sample as a results log keeps it: the line, its secrets redacted
    # Ranks gone while their memory cgroup's OOM kills rose: (rank, before, after).
    oom: tuple[tuple[RankId, int, int], ...] = ()
    running: tuple[int, ...] = ()  # the pids of every launcher the sample saw


def job_key(argv: tuple[str, ...], host: str = "", pid: int = 0) -> str:
    """What every launcher of one job shares: its --master (its rendezvous), else its
    --servers (a PS job), else its --ips (a legacy collective job). A launcher with none of
    them runs a job of one node, its own (a master is what joins nodes into one job): two
    such jobs, or several on one host, are kept apart by their launchers, whatever --job_id
    they share (Paddle's default for every job)."""
    for flag in ("--master", "--servers", "--ips"):
        value = _flag(argv, flag)
        if value:
            return f"{flag[2:]} {value}"
    job_id = _flag(argv, "--job_id")
    named = f" (job_id {job_id})" if job_id and job_id != "default" else ""
    return f"launcher {host}:{pid}{named}"


def _flag(argv: tuple[str, ...], flag: str) -> Optional[str]:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def identity(host: str, pid: int, launcher: int, who: Mapping[str, str],
             log_path: Optional[str]) -> RankId:
    """Who a rank is, from Paddle's variables in its environment (TRAINING_ROLE in PS jobs;
    the trainer id; a server's number from its id or its log's name, serverlog.N)."""
    role_var = who.get("TRAINING_ROLE", "").upper()
    role: Role = "server" if role_var == "PSERVER" else "trainer" if role_var == "TRAINER" \
        else "worker"
    num = who.get("PADDLE_PSERVER_ID" if role == "server" else "PADDLE_TRAINER_ID")
    if num is None and log_path:
        m = re.search(r"(?:server|worker)log\.(\d+)$", os.path.basename(log_path))
        num = m.group(1) if m else None
    rank = int(num) if num is not None and num.strip().isdigit() else None
    return RankId(host, role, rank, pid, launcher)


def _redacted(doc: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The sample with every secret in it hidden (common/secrets.py: what it quotes of a job,
    its launchers' command lines, its ranks' log lines and variables, wherever they stand);
    None where it held none."""
    clean = scrub(doc)
    return None if clean == doc else clean


def _dict(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _ints(v: Any) -> bool:
    return isinstance(v, list) and len(v) >= 2 and all(isinstance(x, int) for x in v[:2])


def _text(d: Mapping[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _num(d: Mapping[str, Any], key: str, kind: type = float) -> Any:
    v = d.get(key)
    t = type(v)
    if t is float or t is int:  # what JSON reads a number as: a dozen of each rank's sample
        return kind(v)
    return kind(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


SAMPLE_FIELDS = frozenset(f.name for f in fields(RankSample))


def _sample(**given: Any) -> RankSample:
    """RankSample(**fields), given every field: made without the frozen dataclass's __init__,
    which sets each of its 26 fields through object.__setattr__ (a tenth of what reading a
    thousand hosts' samples took). A field not given would be missing: the unit tests hold
    that _rank() gives each (SAMPLE_FIELDS)."""
    s = object.__new__(RankSample)
    s.__dict__.update(given)
    return s


class HostStream:
    """The lines of one host's sampler, read in order."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.ids: dict[int, RankId] = {}
        self.launchers: dict[int, Launcher] = {}
        # The host's wall clock and monotonic clock at its first sample that said both: its
        # samples' times are the one plus what the other counted since (steady()).
        self.base: Optional[tuple[float, float]] = None
        self.stepped = 0.0  # how far its wall clock has been stepped since then (seconds)

    def feed(self, line: str) -> Tick:
        """The line's Tick; BadSample where it does not read as one, and then nothing of it
        is kept (the stream reads the next line as if this one never came)."""
        try:
            doc = json.loads(line)
        except ValueError:
            raise BadSample(f"not JSON: {line[:120]!r}") from None
        if not isinstance(doc, dict) or doc.get("v") != SCHEMA:
            raise BadSample(f"not a sample of schema {SCHEMA}: {line[:120]!r}")
        ids, launchers = dict(self.ids), dict(self.launchers)
        try:
            # Nothing secret-looking in the line's text: nothing in its strings, as a JSON
            # text's escapes spell only what is not ASCII (every pattern's words are).
            clean = _redacted(doc) if may_hold_secret(line) else None
            if clean is not None:
                doc, line = clean, json.dumps(clean, separators=(",", ":"))
            return self._tick(doc, line)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError,
                OverflowError) as e:  # OverflowError: a number past a float (1e400: inf)
            self.ids, self.launchers = ids, launchers
            raise BadSample(f"a field that does not read ({type(e).__name__}: {e}): "
                            f"{line[:120]!r}") from None

    def steady(self, doc: Mapping[str, Any]) -> float:
        """The sample's time on the host's clock, kept steady: where the sampler says its
        monotonic clock too ("m"), the wall clock at the first such sample plus the monotonic
        time since. A wall clock stepped since (an NTP step, a date set by hand, a VM
        resumed) then moves no span of the host's figures: a step back of 20 s would make a
        5 s interval -15 s long, and its ranks' CPU seconds a rate of cores they never had."""
        t: float = _num(doc, "t") or 0.0
        m: Optional[float] = _num(doc, "m")
        if m is None:
            return t  # an older sampler: its wall clock as it is
        if self.base is None or m < self.base[1]:  # the first, or the host booted since
            self.base = (t, m)
        steady = self.base[0] + (m - self.base[1])
        self.stepped = t - steady
        return steady

    def _tick(self, doc: Mapping[str, Any], line: str) -> Tick:
        host = _dict(doc, "host")
        t = self.steady(doc)
        new: list[Launcher] = []
        running: list[int] = []
        ranks: list[tuple[RankId, RankSample]] = []
        errors = [str(d["error"]) for d in (doc, host) if isinstance(d.get("error"), str)]
        for job in doc.get("jobs") or ():
            if not isinstance(job, dict) or not isinstance(job.get("pid"), int):
                continue
            lpid = job["pid"]
            running.append(lpid)
            if lpid not in self.launchers and isinstance(job.get("argv"), list):
                argv = tuple(str(a) for a in job["argv"])
                self.launchers[lpid] = Launcher(self.host, lpid, job_key(argv, self.host, lpid),
                                                argv,
                                                str(job.get("log_dir") or "log"),
                                                _text(job, "netns"))
                new.append(self.launchers[lpid])
            for r in job.get("ranks") or ():
                if isinstance(r, dict) and isinstance(r.get("pid"), int):
                    ranks.append(self._rank(r, lpid, t))
        gone, oom = [], []
        for g in doc.get("gone") or ():
            if not isinstance(g, dict) or g.get("pid") not in self.ids:
                continue
            rid = self.ids.pop(g["pid"])
            tail = g.get("tail")
            gone.append((rid, tuple(str(x) for x in tail) if isinstance(tail, list) else ()))
            kills = g.get("oom_kills")
            if isinstance(kills, list) and _ints(kills) and kills[1] > kills[0]:
                oom.append((rid, int(kills[0]), int(kills[1])))
        return Tick(self.host, _num(doc, "n", int) or 0, self._host(host, t, doc),
                    tuple(ranks), tuple(gone), tuple(new), "; ".join(errors) or None,
                    _text(doc, "netns"), oom=tuple(oom), running=tuple(running), line=line)

    def _rank(self, r: Mapping[str, Any], launcher: int, t: float) -> tuple[RankId, RankSample]:
        pid = r["pid"]
        log = _dict(r, "log")
        if pid not in self.ids:
            who = _dict(r, "who")
            self.ids[pid] = identity(self.host, pid, launcher,
                                     {str(k): str(v) for k, v in who.items()},
                                     log.get("path") if isinstance(log.get("path"), str)
                                     else None)
        hook = r.get("hook")
        cg = _dict(r, "cgroup")
        sendq = _dict(r, "sendq")
        errors = [str(d["error"]) for d in (r, log, cg, sendq) if isinstance(d.get("error"), str)]
        io = r.get("io")
        if not (isinstance(io, list) and len(io) == 2 and isinstance(io[0], int)
                and isinstance(io[1], int)):
            io = None
        tail, gpus = r.get("tail"), r.get("gpus")
        # Each empty container read as nothing at once (most ranks, most samples): a
        # thousand hosts' ranks are read every interval.
        return self.ids[pid], _sample(
            t=t, state=str(r.get("state") or "?"), cpu_s=_num(r, "cpu_s") or 0.0,
            run_s=_num(r, "run_s") or 0.0, wait_s=_num(r, "wait_s") or 0.0,
            timed=r.get("sched") is not False,
            running=_num(r, "running", int) or 0, blocked=_num(r, "blocked", int) or 0,
            wchan=str(r["wchan"]) if r.get("wchan") not in (None, "0") else None,
            log_size=_num(log, "size", int), log_steps=_num(log, "steps", int),
            log_last=log.get("last") if isinstance(log.get("last"), str) else None,
            log_path=log.get("path") if isinstance(log.get("path"), str) else None,
            hook_steps=int(hook[0]) if isinstance(hook, list) and hook else None,
            quota_cores=_num(cg, "cores"), periods=_num(cg, "periods", int),
            throttled=_num(cg, "throttled", int), throttled_s=_num(cg, "throttled_s"),
            sendq=tuple(sorted((str(k), int(v)) for k, v in sendq.items()
                               if isinstance(v, int) and k != "error")) if sendq else (),
            log_tail=tuple(str(x) for x in tail) if isinstance(tail, list) and tail else (),
            error="; ".join(errors) or None, oom_kills=_num(r, "oom_kills", int),
            io_read=io[0] if io else None, io_written=io[1] if io else None,
            frozen=r.get("frozen") is True,
            gpus=tuple(g for g in gpus if isinstance(g, int) and not isinstance(g, bool))
            if isinstance(gpus, list) and gpus else ())

    @staticmethod
    def _host(h: Mapping[str, Any], t: float, doc: Mapping[str, Any]) -> HostSample:
        load = h.get("load")
        tcp: Optional[list[int]] = h["tcp"] if _ints(h.get("tcp")) else None
        nics = _dict(h, "nics")
        gpu = _dict(doc, "gpu")
        return HostSample(
            t=t, cpus=_num(h, "cpus", int),
            load1=float(load[0]) if isinstance(load, list) and load else None,
            psi_cpu=_num(h, "psi_cpu"), psi_memory=_num(h, "psi_memory"),
            mem_avail=_num(h, "mem_avail", int),
            nics=tuple((str(k), int(v[0]), int(v[1]), int(v[2]), int(v[3]))
                       for k, v in sorted(nics.items()) if isinstance(v, list) and len(v) >= 4),
            qdiscs=tuple((str(k), str(v[0]), int(v[1]), int(v[2]))
                         for k, v in sorted(_dict(h, "qdiscs").items())
                         if isinstance(v, list) and len(v) >= 3 and _ints(v[1:3])),
            carriers=tuple(str(v) for v in h["carriers"] if isinstance(v, str))
            if isinstance(h.get("carriers"), list) else (),
            cost_s=_num(doc, "cost_s"),
            tcp_out=tcp[0] if tcp else None, tcp_retrans=tcp[1] if tcp else None,
            gpus=tuple(_gpu(g) for g in gpu.get("gpus") or ()
                       if isinstance(g, dict) and _num(g, "i", int) is not None),
            gpu_source=_text(gpu, "source"), gpu_error=_text(gpu, "error"))


def _gpu(g: Mapping[str, Any]) -> GpuSample:
    pids = g.get("pids")
    return GpuSample(
        _num(g, "i", int), util=_num(g, "util", int), mem_util=_num(g, "mem_util", int),
        sm_mhz=_num(g, "sm", int), sm_max_mhz=_num(g, "sm_max", int),
        reasons=_num(g, "reasons", int), temp_c=_num(g, "temp", int),
        power_w=_num(g, "power_w"),
        pids=tuple(p for p in pids if isinstance(p, int)) if isinstance(pids, list) else (),
        error=_text(g, "error"))
