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
  rhythm       rank 0 evaluates or saves alone for 18 s every 45 s (its peers wait), as the
               rig's ten-minute job does
  clock-step   one host's clock steps back 20 s at 15 minutes (an NTP step)
  suspended    every rank stopped for a minute at 10 minutes (a Slurm suspend), then resumed
  long-eval    rank 0 evaluates alone for 45 s every 10 minutes (its peers wait)
  async-save   rank 0's save thread keeps it busy 30 s every 5 minutes; the job keeps its pace
  sharded-save every rank writes its shard of a checkpoint for 70 s every 20 minutes (no step)
  eval-all     every rank evaluates for 70 s every 20 minutes (on a CPU, no step)
  busier-host  the first host's ranks are busier than their peers from their start
  late-start   the lagging host's first samples reach the watch 18 s late (then 2-3 s)
  late-victim  late-start, where the lagging host is the fault's
  gpus         each rank drives a GPU of its host (H100s at their full clock while busy)
  power-cap    with gpus: the first host's GPUs at their software power cap from their start,
               at the clock of their peers (normal under heavy load)
  ps           an async parameter-server job: the first host runs the server, the others
               trainers, each stepping at its own pace (its ranks_per_host: per trainer host)
  ps-throttled with ps: the server on a CPU limit that throttles it in 30 % of its periods
               from its start
  ps-saves     with ps: the server saves its tables 30 s every 5 minutes (1 core, not
               starved): its trainers' queues to it fill and they slow to half their pace
  rank0-steps  only rank 0's log prints step lines (its peers' logs grow without them)
  spinning     with gpus: the ranks that wait spin in NCCL (a core each, on a CPU)
  late-20      the lagging host's samples reach the watch 20 s late, steadily
  checkpoint-io  with checkpointing: rank 0 saves in D state, writing (0.3 core)
  gloo-timeout rank 0's checkpoint at 10 minutes lasts 35 s: after 30 s gloo aborts its
               peers, then rank 0 (the job ends: its own collective timeout)
  two-jobs     two jobs launched without --master, each on half the hosts; the second ends
               cleanly at 10 minutes
  rerun-elsewhere  the job (its --master) ends cleanly at 10 minutes on the first half of
               the hosts and is launched again, the same command, on the other half at 11
Faults (labelled with their host and cause):
  quota        a cgroup quota of 0.25 core on one host's ranks (cause cpu); while rank 0
               evaluates or saves alone, they sleep in the collective like their peers
               (unless they spin)
  noisy        other work takes one host's cores: its ranks wait for a CPU (cause cpu)
  sigstop      one rank stopped (cause stopped)
  sigkill      one rank killed; gloo aborts its peers a second later (cause exit)
  storage      one host's ranks wait on storage (state D): the job crawls (cause storage)
  frozen       one host's cgroup frozen: its ranks make no progress, nor their peers (cause
               frozen)
  restart      one rank killed, gloo aborts its peers, and the launchers start every rank
               again in place 15 s later (elastic): the job steps on (cause exit)
  slowlink     one host's link slowed both ways: the job at 0.4 x, queues to and from it
               full (cause link)
  shaped-sender  one host's sending side shaped (a tbf on its eth0, a standing queue in it):
               the job at 0.5 x, its queue to the next host full, and pairs next to it full
               for a moment now and then (cause link)"""

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
          "checkpointing", "clock-step", "suspended", "long-eval", "async-save",
          "sharded-save", "busier-host", "late-start", "gpus", "power-cap", "ps", "ps-throttled",
          "ps-saves", "rank0-steps", "spinning", "late-20", "checkpoint-io", "gloo-timeout",
          "two-jobs", "rerun-elsewhere", "eval-all", "late-victim", "rhythm")
FAULTS = {"quota": ("cpu",), "noisy": ("cpu",), "sigstop": ("stopped", "hang"),
          "sigkill": ("exit",), "storage": ("storage",), "frozen": ("frozen",),
          "restart": ("exit",), "slowlink": ("link",), "shaped-sender": ("link",)}
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
    halves = "two-jobs" in shape or "rerun-elsewhere" in shape  # a job on half the hosts
    master = () if "two-jobs" in shape else ("--master", f"{_address(0)}:6767")
    argv = ("python3", "-m", "paddle.distributed.launch", *master,
            "--nnodes", str(n_hosts // 2 if halves else n_hosts), "--nproc_per_node", str(per),
            "train.py")
    hosts = [FakeHost(_name(i), _ranks(i, n_hosts, per, shape, 0), launcher=9_000 + i,
                      argv=argv, netns=f"net:[{4026540000 + i}]", t=T0)
             for i in range(n_hosts)]
    later: dict[str, list[FakeRank]] = {}  # rerun-elsewhere: the second run's ranks
    if "rerun-elsewhere" in shape:
        for h in hosts[n_hosts // 2:]:
            later[h.name], h.ranks, h.launcher = h.ranks, [], None
    skew = {hosts[-1].name: 8.0} if "skewed" in shape else {}
    laggard = victim if "late-victim" in shape else hosts[-2 if n_hosts > 1 else 0].name
    if "late-victim" in shape:
        shape.add("late-start")
    lag = {laggard: 20.0 if "late-20" in shape else 2.0} \
        if {"lagging", "late-start", "late-20"} & shape else {}
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
    bursts: dict[tuple[str, str], float] = {}  # a pair full for a moment: until when
    for k in range(steps + 1):
        t = k * dt
        faulty = spec.fault is not None and t >= fault_at and (fault_end is None
                                                                or t < fault_end)
        _scene(hosts, t, dt, shape, later)
        _set(hosts, victim, t, dt, shape, spec.fault if faulty else None, rnd, bursts)
        if spec.fault == "sigkill" and t >= fault_at:
            _kill(hosts, victim, first=t < fault_at + dt)
        if spec.fault == "restart":
            _restart(hosts, victim, t - fault_at, dt, shape, per)
        if "clock-step" in shape and t == 900:
            skew[hosts[-1].name] = skew.get(hosts[-1].name, 0.0) - 20.0
        for h in hosts:
            h.t = T0 + t + skew.get(h.name, 0.0) - dt if k else T0 + skew.get(h.name, 0.0)
            if "gpus" in shape:
                h.gpus = _gpus(h, "power-cap" in shape and h is hosts[0], rnd)
            doc = json.loads(h.line(dt))
            doc["m"] = round(5_000.0 + t, 3)  # its monotonic clock: no step moves it
            # Its NIC carries the all-reduce (a PS server: its trainers' pushes and pulls),
            # about 600 Mbit/s each way at full pace.
            stepping = [r for r in h.ranks if r.role != "PSERVER"] or \
                [r for x in hosts for r in x.ranks if r.role != "PSERVER"]
            pace = sum(r.steps_per_s for r in stepping) / max(1, len(stepping)) / PACE
            if k:
                nic[h.name] = [b + pace * 75e6 * dt * rnd.uniform(0.9, 1.1)
                               for b in nic[h.name]]
            doc["host"]["nics"] = {"eth0": [int(nic[h.name][0]), 0, int(nic[h.name][1]), 0]}
            late = 18.0 if "late-start" in shape and h.name == laggard and t < 15 else 0.0
            at = T0 + t + 0.05 + rnd.random() * 0.3 + lag.get(h.name, 0.0) \
                + (rnd.random() if h.name in lag else 0.0) + late
            yield n, {"type": "sample", "at": round(at, 3), "host": h.name,
                      "sample": doc}
            n += 1


def _ranks(i: int, n_hosts: int, per: int, shape: set[str], gen: int) -> list[FakeRank]:
    """Host i's ranks (gen: how many times they were started again in place)."""
    base = 10_000 + 100_000 * gen + i * per
    if "ps" in shape:
        ranks = [FakeRank(base, 0, role="PSERVER")] if i == 0 else [
            FakeRank(base + k, (i - 1) * per + k, role="TRAINER") for k in range(per)]
    else:
        first = (i % (n_hosts // 2) if {"two-jobs", "rerun-elsewhere"} & shape else i) * per
        ranks = [FakeRank(base + k, first + k) for k in range(per)]
    for k, r in enumerate(ranks):
        r.quota = 2.0 * per
        r.gpus = (k,) if "gpus" in shape else ()
        r.piped = "piped" in shape and i == n_hosts - 1 and k == per - 1
        r.no_step_lines = "rank0-steps" in shape and r.rank != 0
    return ranks


# A clean end of a rank's log: its last step and the script's own last word.
FINISHED = ("step 5990 loss 0.052", "training finished")
# Gloo's collective timeout in a rank that waited 30 s for a peer busy elsewhere (Paddle 3.3.1,
# ../reference/watch.md), then Paddle's words for the abort that follows.
GLOO_ENFORCE = ("terminate called after throwing an instance of 'gloo::EnforceNotMet'",
                "  what():  [enforce fail at /paddle/third_party/gloo/gloo/transport/tcp/"
                "pair.cc:708] ex_ == nullptr. Timed out waiting 30000ms for recv operation "
                "to complete", *ABORTED)


def _scene(hosts: list[FakeHost], t: float, dt: float, shape: set[str],
           later: dict[str, list[FakeRank]]) -> None:
    """Jobs that end and start at their times: two jobs without --master (the second half's
    ends), a run ended and launched again on the other half, a job its own gloo timeout
    ends during rank 0's checkpoint."""
    half = len(hosts) // 2
    if "two-jobs" in shape:
        _end(hosts[half:], t, 600, dt, FINISHED)
    if "rerun-elsewhere" in shape:
        _end(hosts[:half], t, 600, dt, FINISHED)
        if t == 660:
            for i, h in enumerate(hosts[half:], half):
                h.ranks, h.launcher, h.sent = later.pop(h.name), 9_500 + i, False
                h.argv = hosts[0].argv
    if "gloo-timeout" in shape:
        # Its peers wait 30 s in the collective, then abort; rank 0 finds them gone at its
        # next one (its save ends at 35 s).
        if t == 630:
            for h in hosts:
                for r in [r for r in h.ranks if r.rank != 0]:
                    h.ranks.remove(r)
                    r.tail = GLOO_ENFORCE
                    h.gone.append(r)
        _end(hosts, t, 635, dt, ABORTED)


def _end(hosts: list[FakeHost], t: float, at: float, dt: float, tail: tuple[str, ...]) -> None:
    """At `at`, every rank of these hosts ends with this tail; an interval later their
    launchers exit."""
    for h in hosts:
        if t == at:
            while h.ranks:
                r = h.ranks.pop()
                r.tail = tail
                h.gone.append(r)
        elif t == at + dt:
            h.launcher = None


def _restart(hosts: list[FakeHost], victim: str, since: float, dt: float, shape: set[str],
             per: int) -> None:
    """An elastic restart in place: the victim's rank killed, its peers aborted an interval
    later, and 15 s after the kill every launcher starts its ranks again."""
    if since == 0:
        _kill(hosts, victim, first=True)
    elif since == dt:
        _kill(hosts, victim, first=False)
    elif since == 15:
        for i, h in enumerate(hosts):
            h.ranks = _ranks(i, len(hosts), per, shape, 1)


def _set(hosts: list[FakeHost], victim: str, t: float, dt: float, shape: set[str],
         fault: Any, rnd: random.Random, bursts: dict[tuple[str, str], float]) -> None:
    """Each rank's figures for the interval ending at t."""
    pace = PACE * (1 + rnd.uniform(-0.08, 0.08))
    evaluating = "evaluating" in shape and t % 60 < 4 and t >= 60
    saving = "checkpointing" in shape and t % 120 < 25 and t >= 120
    saving = saving or ("gloo-timeout" in shape and 600 <= t < 635) or (
        "rhythm" in shape and t % 45 < 18 and t >= 45)
    suspended = "suspended" in shape and 600 <= t < 660
    evaluating = evaluating or ("long-eval" in shape and t % 600 < 45 and t >= 600)
    saving_async = "async-save" in shape and t % 300 < 30 and t >= 300
    sharded = "sharded-save" in shape and t % 1200 < 70 and t >= 1200
    eval_all = "eval-all" in shape and t % 1200 < 70 and t >= 1200
    if "warmup" in shape and t < 30:
        pace = 0.0
    if "slowdowns" in shape and t % 900 >= 840:
        pace *= 0.5
    if evaluating:
        pace *= 0.2
    if saving or suspended or sharded or eval_all or fault == "frozen":
        pace = 0.0
    if fault == "storage":
        pace *= 0.3
    if fault == "quota" or fault == "noisy":
        pace *= 0.3
    if fault == "slowlink":
        pace *= 0.4
    if fault == "shaped-sender":
        pace *= 0.5
    if fault == "sigstop":
        pace = 0.0
    for h in hosts:  # a shaped sender's own tbf holds a standing queue of what it sends
        h.backlog = 48 * KIB if h.name == victim and fault == "shaped-sender" else 0
    if "ps" in shape:
        _set_ps(hosts, t, shape, pace, rnd)
        return
    all_ranks = [(h, r) for h in hosts for r in h.ranks]
    for i, (h, r) in enumerate(all_ranks):
        busy = rnd.uniform(0.35, 0.45) * (pace / PACE if pace else 0.05)
        wait = busy * rnd.uniform(0.05, 0.15)
        r.state, r.throttled_share, r.write_rate, r.frozen = "S", 0.0, 0.0, False
        if "warmup" in shape and t < 30:
            busy, wait, r.state = rnd.uniform(0.8, 1.0), 0.1, "R"
        if (evaluating or saving) and i == 0:
            busy, wait, r.state = rnd.uniform(0.9, 1.0), 0.05, "R"
            if saving and "checkpoint-io" in shape:  # writing it: in the kernel, on storage
                busy, wait, r.state, r.write_rate = 0.3, 0.0, "D", 40e6
        if "spinning" in shape and not (h.name == victim and fault is not None):
            busy, wait, r.state = rnd.uniform(0.95, 1.0), 0.05, "R"  # NCCL's waits spin
        if saving_async and i == 0:
            busy, wait, r.state = busy + rnd.uniform(0.8, 0.9), wait + 0.05, "R"
        if sharded:
            busy, wait, r.state, r.write_rate = rnd.uniform(0.3, 0.5), 0.02, "D", 30e6
        if eval_all:
            busy, wait, r.state = rnd.uniform(0.9, 1.0), 0.05, "R"
        if "busier-host" in shape and h is hosts[0] and pace:
            busy = busy * 2.5 + 0.3
        if suspended:
            busy, wait, r.state = 0.0, 0.0, "T"
        if h.name == victim and fault == "quota" and (evaluating or saving) and i != 0 \
                and "spinning" not in shape:
            # Rank 0 works alone: the starved ranks wait for it too, asleep in the
            # collective (gloo's waits sleep; NCCL's spin), too idle to be throttled.
            r.quota, r.throttled_share, r.state = 0.25, 0.0, "S"
            busy, wait = 0.02, 0.0
        elif h.name == victim and fault == "quota":
            r.quota, r.throttled_share, r.state = 0.25, 0.9, "R"
            busy, wait = 0.73, 0.64
        elif h.name == victim and fault == "noisy":
            busy, wait, r.state = 0.8, 0.6, "R"
        elif h.name == victim and fault == "sigstop" and r is h.ranks[0]:
            r.state = "T"
        elif h.name == victim and fault == "storage":
            busy, wait, r.state = 0.05, 0.0, "D"
        elif h.name == victim and fault == "frozen":  # cgroup v1's freezer shows them in D
            busy, wait, r.state, r.frozen = 0.0, 0.0, "D", True
        elif r.quota is not None and r.quota < 1.0:
            r.quota = 2.0 * len(h.ranks)  # the quota was lifted
        r.steps_per_s, r.busy, r.wait = pace, busy, wait
        nxt = all_ranks[(i + 1) % len(all_ranks)][0]
        full = "busy-links" in shape and pace > 0.5 * PACE and rnd.random() < 0.9
        if fault == "slowlink":
            full = full or victim in (h.name, nxt.name)
        elif fault == "shaped-sender":
            full = full or h.name == victim or _burst(bursts, (h.name, nxt.name), t, rnd)
        r.sendq = {_address(hosts.index(nxt)): rnd.randint(100, 350) * KIB} \
            if full and nxt is not h else {}


def _burst(bursts: dict[tuple[str, str], float], pair: tuple[str, str], t: float,
           rnd: random.Random) -> bool:
    """Whether a pair is full for a moment (10-20 s, begun in 3 % of its samples): the
    traffic of a slowed job comes in bursts."""
    if bursts.get(pair, -1.0) <= t and rnd.random() < 0.03:
        bursts[pair] = t + rnd.uniform(10, 20)
    return bursts.get(pair, -1.0) > t


def _set_ps(hosts: list[FakeHost], t: float, shape: set[str], pace: float,
            rnd: random.Random) -> None:
    """An async PS job's interval: each trainer at its own pace, pushing to the server on
    the first host, which serves them (and saves its tables, with ps-saves)."""
    saving = "ps-saves" in shape and t % 300 < 30 and t >= 300
    server = hosts[0].ranks[0]
    server.steps_per_s, server.busy, server.wait, server.state = 0.0, 0.5, 0.05, "S"
    server.quota, server.throttled_share = 2.0, 0.0
    if "ps-throttled" in shape:
        server.quota, server.throttled_share, server.wait = 1.0, 0.3, 0.2
    if saving:
        server.busy, server.state = rnd.uniform(0.95, 1.0), "R"
    for h in hosts[1:]:
        for r in h.ranks:
            own = pace * (0.5 if saving else 1.0) * (1 + rnd.uniform(-0.05, 0.05))
            r.steps_per_s, r.busy = own, rnd.uniform(0.35, 0.45) * own / PACE
            r.wait, r.state = r.busy * 0.1, "S"
            full = saving or ("busy-links" in shape and rnd.random() < 0.9)
            r.sendq = {_address(0): rnd.randint(100, 350) * KIB} if full else {}


def _gpus(h: FakeHost, capped: bool, rnd: random.Random) -> list[dict[str, Any]]:
    """The host's GPUs as the sampler's NVML part prints them: busy while their rank steps,
    at 1,980 MHz; capped: held to the software power cap (0x4) at the same clock."""
    out = []
    for k, r in enumerate(h.ranks):
        busy = r.steps_per_s > 0
        out.append({"i": k, "util": rnd.randint(92, 100) if busy else 0, "mem_util": 40,
                    "sm": 1980 if busy else 345, "sm_max": 1980,
                    "reasons": 0x4 if capped and busy else 0 if busy else 0x1,
                    "temp": 62, "power_w": 700.0 if capped else 520.0, "pids": [r.pid]})
    return out


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
