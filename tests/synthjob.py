"""Seeded synthetic jobs for the watch's corpus, built from the shapes captured on the rig and
the GPU machine (docs/watch.md, ../reference/watch.md's figures): what the rig cannot run for
long or at size. A synchronous data-parallel job steps at one pace on every rank; each rank
is busy ~0.4 cores while stepping and sleeps in the collective while a peer holds it; the
samples are the real sampler's (tests/watchtools.FakeHost prints them), received by the
watch a little after the host took them.

Shapes (healthy; each is a rhythm of real jobs, never a fault):
  evaluating   rank 0 evaluates alone a few seconds every minute (its peers wait)
  busy-links   the all-reduce keeps send queues to the next host full in most samples
  slowdowns    the whole job slows to half its pace for a minute, alike, every 15 minutes
  warmup       the first 30 s import and build: busy, no step yet
  skewed       one host's clock 8 s ahead
  lagging      one host's samples reach the watch 2-3 s late, steadily
  piped        one rank writes to a pipe (its progress cannot be read)
  checkpointing  rank 0 saves a checkpoint alone for 25 s every 2 minutes (its peers wait)
  clock-step   one host's clock steps back 20 s at 15 minutes (an NTP step)
  suspended    every rank stopped for a minute at 10 minutes (a Slurm suspend), then resumed
Faults (labelled with their host and cause):
  quota        a cgroup quota of 0.25 core on one host's ranks (cause cpu)
  noisy        other work takes one host's cores: its ranks wait for a CPU (cause cpu)
  sigstop      one rank stopped (cause stopped)
  sigkill      one rank killed; gloo aborts its peers a second later (cause exit)"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from watchtools import ABORTED, FakeHost, FakeRank

from preflight.model.watch import WatchPolicy
from preflight.watch.score import Fault, Label

SHAPES = ("evaluating", "busy-links", "slowdowns", "warmup", "skewed", "lagging", "piped",
          "checkpointing", "clock-step", "suspended")
FAULTS = {"quota": ("cpu",), "noisy": ("cpu",), "sigstop": ("stopped", "hang"),
          "sigkill": ("exit",)}
T0 = 1_800_000_000.0  # the watch's start, on its clock
PACE = 10.0  # steps a second at full pace
KIB = 1024


@dataclass
class Made:
    spec: Any  # corpustools.Synthetic
    victim: str

    def label(self, base: Label) -> Label:
        s = self.spec
        if s.fault is None:
            return base
        until = None if s.fault_s is None else T0 + s.fault_at_s + s.fault_s
        return replace(base, faults=(Fault(s.fault, (self.victim,), FAULTS[s.fault],
                                           T0 + s.fault_at_s, until),))

    def records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        return _records(self.spec, self.victim)


def job(spec: Any) -> Made:
    if spec.fault is not None and spec.fault not in FAULTS:
        raise ValueError(f"unknown synthetic fault {spec.fault}")
    for s in spec.shape:
        if s not in SHAPES:
            raise ValueError(f"unknown synthetic shape {s}")
    return Made(spec, _name(min(1, spec.hosts - 1)))


def _name(i: int) -> str:
    return f"syn{i + 1:04d}"


def _address(i: int) -> str:
    return f"10.{200 + i // 65536}.{i // 256 % 256}.{i % 256 + 1}"


def _records(spec: Any, victim: str) -> Iterator[tuple[int, dict[str, Any]]]:
    rnd = random.Random(spec.seed)
    shape = set(spec.shape)
    dt = spec.interval_s
    n_hosts, per = spec.hosts, spec.ranks_per_host
    argv = ("python3", "-m", "paddle.distributed.launch", "--master", f"{_address(0)}:6767",
            "--nnodes", str(n_hosts), "--nproc_per_node", str(per), "train.py")
    hosts = []
    for i in range(n_hosts):
        ranks = [FakeRank(10_000 + i * per + k, i * per + k) for k in range(per)]
        for r in ranks:
            r.quota = 2.0 * per
        hosts.append(FakeHost(_name(i), ranks, launcher=9_000 + i, argv=argv,
                              netns=f"net:[{4026540000 + i}]", t=T0))
    if "piped" in shape:
        hosts[-1].ranks[-1].piped = True
    skew = {hosts[-1].name: 8.0} if "skewed" in shape else {}
    lag = {hosts[-2 if n_hosts > 1 else 0].name: 2.0} if "lagging" in shape else {}
    policy = WatchPolicy(interval_s=dt)
    yield 0, {"type": "start", "at": T0, "argv": ["watch", "synthetic", str(spec.seed)],
              "hosts": [h.name for h in hosts], "marker": f"syn{spec.seed}",
              "policy": vars(policy),
              "at_check": {h.name: {"cores": 2.0 * per, "link_bps": 1e9} for h in hosts},
              "addresses": {_address(i): h.name for i, h in enumerate(hosts)}}
    steps = int(spec.hours * 3600 / dt)
    fault_at = spec.fault_at_s
    fault_end = None if spec.fault_s is None else fault_at + spec.fault_s
    n = 1
    nic = {h.name: [0.0, 0.0] for h in hosts}  # bytes received, sent
    for k in range(steps + 1):
        t = k * dt
        faulty = spec.fault is not None and t >= fault_at and (fault_end is None
                                                                or t < fault_end)
        _set(hosts, victim, t, dt, shape, spec.fault if faulty else None, rnd)
        if spec.fault == "sigkill" and t >= fault_at:
            _kill(hosts, victim, first=t < fault_at + dt)
        if "clock-step" in shape and t == 900:
            skew[hosts[-1].name] = skew.get(hosts[-1].name, 0.0) - 20.0
        for h in hosts:
            h.t = T0 + t + skew.get(h.name, 0.0) - dt if k else T0 + skew.get(h.name, 0.0)
            doc = json.loads(h.line(dt))
            # Its NIC carries the all-reduce: about 600 Mbit/s each way at full pace.
            pace = sum(r.steps_per_s for r in h.ranks) / max(1, len(h.ranks)) / PACE
            if k:
                nic[h.name] = [b + pace * 75e6 * dt * rnd.uniform(0.9, 1.1)
                               for b in nic[h.name]]
            doc["host"]["nics"] = {"eth0": [int(nic[h.name][0]), 0, int(nic[h.name][1]), 0]}
            at = T0 + t + 0.05 + rnd.random() * 0.3 + lag.get(h.name, 0.0) \
                + (rnd.random() if h.name in lag else 0.0)
            yield n, {"type": "sample", "at": round(at, 3), "host": h.name,
                      "sample": doc}
            n += 1


def _set(hosts: list[FakeHost], victim: str, t: float, dt: float, shape: set[str],
         fault: Any, rnd: random.Random) -> None:
    """Each rank's figures for the interval ending at t."""
    pace = PACE * (1 + rnd.uniform(-0.08, 0.08))
    evaluating = "evaluating" in shape and t % 60 < 4 and t >= 60
    saving = "checkpointing" in shape and t % 120 < 25 and t >= 120
    suspended = "suspended" in shape and 600 <= t < 660
    if "warmup" in shape and t < 30:
        pace = 0.0
    if "slowdowns" in shape and t % 900 >= 840:
        pace *= 0.5
    if evaluating:
        pace *= 0.2
    if saving or suspended:
        pace = 0.0
    if fault == "quota" or fault == "noisy":
        pace *= 0.3
    if fault == "sigstop":
        pace = 0.0
    all_ranks = [(h, r) for h in hosts for r in h.ranks]
    for i, (h, r) in enumerate(all_ranks):
        busy = rnd.uniform(0.35, 0.45) * (pace / PACE if pace else 0.05)
        wait = busy * rnd.uniform(0.05, 0.15)
        r.state, r.throttled_share = "S", 0.0
        if "warmup" in shape and t < 30:
            busy, wait, r.state = rnd.uniform(0.8, 1.0), 0.1, "R"
        if (evaluating or saving) and i == 0:
            busy, wait, r.state = rnd.uniform(0.9, 1.0), 0.05, "R"
        if suspended:
            busy, wait, r.state = 0.0, 0.0, "T"
        if h.name == victim and fault == "quota":
            r.quota, r.throttled_share, r.state = 0.25, 0.9, "R"
            busy, wait = 0.73, 0.64
        elif h.name == victim and fault == "noisy":
            busy, wait, r.state = 0.8, 0.6, "R"
        elif h.name == victim and fault == "sigstop" and r is h.ranks[0]:
            r.state = "T"
        elif r.quota is not None and r.quota < 1.0:
            r.quota = 2.0 * len(h.ranks)  # the quota was lifted
        r.steps_per_s, r.busy, r.wait = pace, busy, wait
        nxt = all_ranks[(i + 1) % len(all_ranks)][0]
        full = "busy-links" in shape and pace > 0.5 * PACE and rnd.random() < 0.9
        r.sendq = {_address(hosts.index(nxt)): rnd.randint(100, 350) * KIB} \
            if full and nxt is not h else {}


def _kill(hosts: list[FakeHost], victim: str, first: bool) -> None:
    """SIGKILL of the victim's first rank (first: its interval): it ends without a word;
    its peers end an interval later, gloo's abort in their logs."""
    if first:
        for h in hosts:
            if h.name == victim:
                r = h.ranks.pop(0)
                r.tail = ()
                h.gone.append(r)
        return
    for h in hosts:
        while h.ranks:
            r = h.ranks.pop()
            r.tail = ABORTED
            h.gone.append(r)
