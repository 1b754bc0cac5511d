"""Sampler lines for the watch's unit tests, in the shape the real sampler prints them
(tests/fixtures/watch holds lines captured from it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, cast

from preflight.model.findings import Status
from preflight.model.watch import WatchPolicy
from preflight.watch.judge import judge
from preflight.watch.samples import HostStream
from preflight.watch.series import WatchState


@dataclass
class FakeRank:
    """A rank whose counters advance by rate per second of the host's clock."""

    pid: int
    rank: int
    role: str = ""  # TRAINING_ROLE: "", "TRAINER", "PSERVER"
    steps_per_s: float = 10.0
    busy: float = 0.4  # cores on a CPU or waiting for one
    wait: float = 0.05  # of which waiting for a CPU
    state: str = "S"
    quota: Optional[float] = None
    throttled_share: float = 0.0
    hook: bool = False
    sendq: dict[str, int] = field(default_factory=dict)  # peer address -> bytes queued
    tail: tuple[str, ...] = ("step 90 loss 0.1",)  # its log's last lines, once it is gone
    gpus: tuple[int, ...] = ()  # the GPUs it drives (the sampler's "gpus" of a rank)
    # Its memory cgroup's OOM kills (before, after) as its gone entry says; None: not read.
    oom: Optional[tuple[int, int]] = None
    piped: bool = False  # its stdout is a pipe: no log the sampler can read
    no_step_lines: bool = False  # its log grows, but prints no step line (only rank 0 does)
    write_rate: float = 0.0  # bytes a second it writes through the storage layer
    last: Optional[str] = None  # its log's last line (the sampler sends it when it changes)
    frozen: bool = False  # its cgroup frozen (the sampler's "frozen")
    io: bool = True  # False: no storage figures (an older sampler, no task I/O accounting)
    timed: bool = True  # False: a kernel without schedstat (no run and wait times)
    # running totals
    steps: float = 0.0
    run_s: float = 0.0
    wait_s: float = 0.0
    periods: int = 0
    throttled: int = 0
    written: float = 0.0
    sent_who: bool = field(default=False)

    def advance(self, dt: float) -> None:
        if self.state not in ("T", "t", "Z"):
            self.steps += self.steps_per_s * dt
            self.run_s += (self.busy - self.wait) * dt
            self.wait_s += self.wait * dt
            self.written += self.write_rate * dt
        self.periods += int(10 * dt)
        self.throttled += int(10 * dt * self.throttled_share)

    def part(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pid": self.pid, "state": self.state, "cpu_s": round(self.run_s, 3),
            "threads": 3, "run_s": round(self.run_s, 4), "wait_s": round(self.wait_s, 4),
            "running": 1 if self.state == "R" else 0, "blocked": 0, "wchan": "futex_do_wait",
            "log": {"path": f"/job/log/{'serverlog' if self.role == 'PSERVER' else 'workerlog'}"
                            f".{self.rank}", "size": int(self.steps * 30),
                    "steps": 0 if self.no_step_lines else int(self.steps)},
            "hook": [int(self.steps), 0.0] if self.hook else None,
            "cgroup": None if self.quota is None else {
                "cores": self.quota, "path": "/sys/fs/cgroup/cpu/x", "periods": self.periods,
                "throttled": self.throttled, "throttled_s": self.throttled * 0.05},
            "sendq": dict(self.sendq)}
        if self.last is not None and not self.piped:
            out["log"]["last"] = self.last
        if self.io:
            out["io"] = [0, int(self.written)]
        if self.frozen:
            out["frozen"] = True
        if self.gpus:
            out["gpus"] = list(self.gpus)
        if self.piped:
            out["log"] = {"path": "pipe:[4026]"}
        if not self.timed:  # as the sampler prints it: zeros, said to be unknown
            out.update(run_s=0.0, wait_s=0.0, sched=False)
        if not self.sent_who:
            who = {"PADDLE_TRAINERS_NUM": "4"}
            if self.role:
                who["TRAINING_ROLE"] = self.role
            who["PADDLE_PSERVER_ID" if self.role == "PSERVER" else "PADDLE_TRAINER_ID"] = \
                str(self.rank)
            out["who"] = who
            self.sent_who = True
        return out


@dataclass
class FakeHost:
    name: str
    ranks: list[FakeRank]
    launcher: Optional[int] = 100  # None: no launcher of any job on it (yet)
    netns: str = "net:[4026531992]"
    argv: Sequence[str] = ("python3", "-m", "paddle.distributed.launch", "--master",
                           "10.0.0.1:6767", "train.py")
    t: float = 1000.0
    n: int = 0
    extra: list[dict[str, Any]] = field(default_factory=list)  # other launchers' parts
    sent: bool = False
    gone: list[FakeRank] = field(default_factory=list)
    resent_share: float = 0.0  # of the TCP segments it sends (100 a second)
    tcp: tuple[float, float] = (0.0, 0.0)
    # Its GPUs as the sampler's NVML part prints them ({"i", "util", "sm", "sm_max",
    # "reasons", "temp", "power_w", "pids"}); none: a host without an NVIDIA driver.
    gpus: list[dict[str, Any]] = field(default_factory=list)
    # Its monotonic clock, as the sampler says it beside the wall clock ("m"); None: an older
    # sampler that says only the wall clock.
    mono: Optional[float] = None
    psi_cpu: Optional[float] = None  # its CPU pressure (PSI some avg10, %); None: not said
    # Bytes queued in its eth0's qdisc at each sample (a standing queue: a tbf shaper on its
    # sending side holds what it sends); None: its qdiscs not said (an older sampler)
    backlog: Optional[int] = None
    # Bytes queued in another interface's qdisc (another container's veth, shaped), which
    # its jobs' traffic does not leave by (the sampler's "carriers" names eth0 alone)
    other_backlog: int = 0

    def line(self, dt: float = 5.0) -> str:
        """The next sample, dt seconds after the last."""
        if self.n:
            self.t += dt
            if self.mono is not None:
                self.mono += dt
            for r in self.ranks:
                r.advance(dt)
            self.tcp = (self.tcp[0] + 100 * dt, self.tcp[1] + 100 * dt * self.resent_share)
        job: dict[str, Any] = {"pid": self.launcher, "state": "S",
                               "ranks": [r.part() for r in self.ranks]}
        if not self.sent:
            job.update(argv=list(self.argv), log_dir="log", netns=self.netns)
            self.sent = True
        doc = {"v": 1, "n": self.n, "t": self.t, "netns": self.netns,
               "host": {"cpus": 2, "load": [1.0, 1.0, 1.0], "nics": {"eth0": [1, 0, 2, 0]},
                        "tcp": [int(self.tcp[0]), int(self.tcp[1])]},
               "jobs": ([job] if self.launcher is not None else []) + self.extra,
               "gone": [{"pid": r.pid, "who": {}, "launcher": self.launcher,
                         "tail": list(r.tail),
                         **({"oom_kills": list(r.oom)} if r.oom else {})} for r in self.gone],
               "cost_s": 0.01 * (self.n + 1)}
        if self.gpus:
            doc["gpu"] = {"source": "nvml", "gpus": [dict(g) for g in self.gpus]}
        if self.mono is not None:
            doc["m"] = round(self.mono, 3)
        if self.psi_cpu is not None:
            cast(dict[str, Any], doc["host"])["psi_cpu"] = self.psi_cpu
        if self.backlog is not None:
            cast(dict[str, Any], doc["host"])["qdiscs"] = {
                "eth0": ["tbf" if self.backlog else "fq_codel", 0, self.backlog, 0],
                "veth7c1e": ["tbf", 0, self.other_backlog, 0]}
            cast(dict[str, Any], doc["host"])["carriers"] = ["eth0"]
        self.gone = []
        self.n += 1
        return json.dumps(doc)


POLICY = WatchPolicy(interval_s=5.0, margin=0.25, persist_s=15.0, hang_s=60.0)


def cluster(n: int = 4, **kw) -> list[FakeHost]:
    return [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + i, i, **kw)],
                     netns=f"net:[{4026532000 + i}]") for i in range(n)]


def gpu_cluster(n: int = 4) -> list[FakeHost]:
    """n hosts, a rank on each driving its host's GPU 0: busy H100s at their full clock."""
    hosts = cluster(n, gpus=(0,))
    for h in hosts:
        h.gpus = [{"i": 0, "util": 100, "mem_util": 40, "sm": 1980, "sm_max": 1980,
                   "reasons": 0, "temp": 62, "power_w": 520.0, "pids": [h.ranks[0].pid]}]
    return hosts


def quota_starved(hosts: list[FakeHost], victim: int = 1, at: float = 10, also=None):
    """A change for watched(): at `at`, every rank slows alike (a synchronous job) but the
    victim host's keeps busy, throttled by a quota of 0.25 core (also(victim) plants more
    on it then); every rank had a 2-core quota before."""
    for h in hosts:
        h.ranks[0].quota = 2.0

    def change(t):
        if t == at:
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 3.0, 0.16
            r = hosts[victim].ranks[0]
            r.busy, r.wait, r.quota, r.throttled_share, r.state = 0.73, 0.64, 0.25, 0.9, "R"
            if also is not None:
                also(hosts[victim])
    return change


# A rank's log as gloo aborted it (its peer lost): Paddle's words for SIGABRT.
ABORTED = ("----------------------", "Error Message Summary:", "----------------------",
           "FatalError: `Process abort signal` is detected by the operating system.",
           "  [TimeInfo: *** Aborted at 1795725603 (unix time) try \"date -d @1795725603\" "
           "if you are using GNU date ***]",
           "  [SignalInfo: *** SIGABRT (@0x4532) received by PID 17714 (TID 0x7fb0f2ad6040) "
           "from PID 17714 ***]")


def sigkilled(hosts, victim="node03", at=30, oom=None):
    """A change(t) for watched(): at `at`, victim's rank is SIGKILLed and gloo aborts every
    peer in the same second (their logs end as ABORTED); oom: every rank's OOM kill counts
    as their gone entries say."""
    def kill(t):
        if t == at:
            for h in hosts:
                r = h.ranks.pop()
                if h.name != victim:
                    r.tail = ABORTED
                r.oom = oom
                h.gone = [r]
    return kill


def watched(hosts: list[FakeHost], seconds: float, policy: WatchPolicy = POLICY,
            change=None, at_check=None, state=None, addresses=None, every=None,
            real_clock: bool = True):
    """Feeds every host's samples for `seconds` (change(t) may plant a fault as the watch
    goes); returns the findings at the end, and the state. every: a list that gets each
    judgement's findings as the watch made them, once an interval (the last is returned).
    The watch's clock counts one a judgement, or with real_clock the interval's seconds (what
    the job's time is counted in)."""
    tick = policy.interval_s if real_clock else 1.0
    state = state or WatchState(keep=12)
    streams = getattr(state, "_streams", None) or {h.name: HostStream(h.name) for h in hosts}
    state._streams = streams
    steps = int(seconds / policy.interval_s)
    for i in range(steps + 1):
        if change is not None:
            change(i * policy.interval_s)
        for h in hosts:
            state.add(streams[h.name].feed(h.line(policy.interval_s)), received=i * tick)
        if every is not None and i < steps:
            every.append(judge(state, policy, i * tick, at_check or {}, addresses or {},
                               final=False))
    found = judge(state, policy, steps * tick, at_check or {}, addresses or {})
    if every is not None:
        every.append(found)
    return found, state


def nobody_named(judgements) -> None:
    """Asserts that no judgement of a run blamed anyone: no failure, and no warning naming a
    cause (the corpus's measure of a false blame, preflight.watch.score.blames), at any
    judgement, not only at the last."""
    from preflight.watch.score import blames
    said = [(i, f.check, f.status.value, f.hosts, f.message[:160])
            for i, found in enumerate(judgements) for f in found if blames(f)]
    assert judgements and said == [], said[:3]


def named(findings, check=None):
    return [(f.check, f.status, f.hosts) for f in findings
            if f.status is not Status.PASS and (check is None or f.check == check)]


def held(r: dict[str, Any]) -> bool:
    """A finding record the watch said against hosts: not a pass, and not the warning of a
    job that slowed with no cause seen (it names nobody: rules/progress.py)."""
    return r["type"] == "finding" and r["status"] != "pass" and "pace_ratio" not in r


def records(log: str) -> list[dict[str, Any]]:
    """The records of a watch's log, in order."""
    with open(log) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def first(log: str, kind: str, check: str, deadline: float) -> dict[str, Any] | None:
    """The first record of that kind and check in the watch's log, waiting until deadline."""
    while time.monotonic() < deadline:
        if os.path.exists(log):
            for r in records(log):
                if r["type"] == kind and r.get("check") == check:
                    return r
        time.sleep(1)
    return None


def rank_pid(log: str, host: str, deadline: float) -> int:
    """The pid of host's (first) rank, from the samples in a watch's log, waiting (1 s at a
    time) until deadline, a time.monotonic()."""
    while time.monotonic() < deadline:
        for r in records(log) if os.path.exists(log) else ():
            if r["type"] == "sample" and r["host"] == host:
                for j in r["sample"]["jobs"]:
                    for rank in j.get("ranks", ()):
                        return int(rank["pid"])
        time.sleep(1)
    raise AssertionError(f"no rank of {host} sampled")


def cli_popen(cluster: Any, *args: str, quiet: bool = False) -> subprocess.Popen[str]:
    """preflight ARGS started from the simulated cluster's client namespace, interruptible
    with SIGINT as from a terminal; quiet: its standard output thrown away."""
    from support import interruptible
    return subprocess.Popen(
        cluster.tb.client_cmd([sys.executable, "-m", "preflight", *args]),
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=cluster.tb.base, env=dict(os.environ, PYTHONSAFEPATH="1"),
        preexec_fn=interruptible)


def wait_gone(pid: int, seconds: float) -> None:
    """Waits, bounded, for a process to end (a launch stopping its job); KILLed after."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)


def records_so_far(log: str) -> list[dict[str, Any]]:
    """The whole records of a watch's log it is writing now (its last line may be half
    written): none where it has none yet."""
    out = []
    try:
        with open(log) as fh:
            for line in fh:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def steps_logged(cluster: Any, host: str) -> int:
    """The step lines in the host's first worker log so far (0 before it has one)."""
    try:
        with open(cluster.private(host, "/root/log/workerlog.0")) as fh:
            return sum(1 for line in fh if line.startswith("step "))
    except OSError:
        return 0


def relaunched_on(cluster: Any, watch: subprocess.Popen[str], wlog: str, spare: str,
                  seconds: float) -> tuple[float, Optional[int], list[dict[str, Any]]]:
    """Waits, bounded, for the job `watch --act` launched again to step on the spare: when it
    did (time.time()), the pid of that launch, and the watch's act records so far."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and steps_logged(cluster, spare) < 3:
        assert watch.poll() is None, watch.communicate()
        time.sleep(1)
    acts = [r for r in records_so_far(wlog) if r["type"] == "act"]
    return time.time(), next((r.get("pid") for r in acts if r["step"] == "launch"), None), acts


def stop_watched(watch: Optional[subprocess.Popen[str]], relaunch_pid: Optional[int],
                 launch: subprocess.Popen[str]) -> tuple[str, str]:
    """Stops the watch (SIGINT, as from a terminal), the job `--act` launched again (its
    launch stops it on every host) and the first launch; returns the watch's output."""
    out, err = "", ""
    if watch is not None:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=60)
    if relaunch_pid:
        os.kill(relaunch_pid, signal.SIGINT)
        wait_gone(relaunch_pid, 60)
    launch.send_signal(signal.SIGINT)
    launch.wait(60)
    return out, err
