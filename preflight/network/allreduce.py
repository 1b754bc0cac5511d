"""Runs a short all-reduce across hosts with Paddle's own launcher -> AllReduce (no judging).

Every host gets one command: unpack the benchmark into a fresh private directory, run
`python -m paddle.distributed.launch` under the host's `timeout`, then print the ranks'
progress and, on failure, the log's tail. While it runs the controller polls each host's
progress (network/progress.py) and decides from what the ranks did, not from a guess: the
launch goes on while it progresses (a host reaching the next stage, the rendezvous connecting
more of its mesh) and is cut when nothing progressed for its idle window, sized from how long
the probe saw Paddle's import take; then the collectives get the time the budget predicted,
counted from the measured join. A rank that fails, never joins or stops beating stops the run
and is named; a run still progressing at its deadline is cut with its finished sizes kept; a
stall with nobody to blame is the cluster's; a run that reaches its own time limit while still
progressing says so (out of time), blaming nobody. On stopping, the launcher's processes are
killed on every host, found by that host's unique run directory name: one per host and run,
so that hosts sharing a /tmp (several slurmd on one machine, a shared scratch) neither collide
nor stop or remove each other's."""

from __future__ import annotations

import base64
import functools
import re
import secrets
import shlex
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Optional

from preflight.collect.remote import Done, Remote, in_parallel
from preflight.common import nccllog
from preflight.common.containercmd import command, exec_argv, run_argv
from preflight.model.container import ContainerSpec
from preflight.model.measure import AllReduce, Backend, SizeResult
from preflight.network import progress as P
from preflight.network.budget import LAUNCH_IDLE_S

LOG, HINT = "PREFLIGHT-LOG ", "PREFLIGHT-HINT "
GRACE_S = 5.0  # after one rank fails, how long the others get to report their own failure
# The host's own `timeout` is the net under the controller (which may be killed): it fires
# this much after the controller's last deadline, so that the controller decides first.
HOST_EXTRA_S = 10.0
STALL_WINDOW_S = 15.0  # at the deadline, a collective completed this recently: still going
LOG_LINES = 40
# Lines of a failing rank's log that say why; the last one found is quoted in the finding.
_WHY = re.compile(r"(Error|Exception|error:|refused|timed out|Timeout|Killed|Abort|"
                  r"No such|not found|cannot|failed)", re.IGNORECASE)
# How a shell reports a command that the stop's TERM or KILL ended: dash's bare word, bash's
# "sh: line 1: 1234 Terminated  timeout ...".
_STOP_REPORT = re.compile(r"^(?:.*: line \d+: +\d+ +)?(?:Terminated|Killed)\b")
# Paddle's launcher's own lines: "LAUNCH INFO 2026-11-24 19:29:09,044 Waiting peer start...".
_LAUNCHER_LINE = re.compile(r"^LAUNCH [A-Z]+ (?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )?(.*)$")
_SECRET = re.compile(r"(?i)\b(\w*(?:passw|secret|token|api_?key|credential)\w*)=\S+")


DEFAULT_SIZES_MIB = (1.0, 8.0, 32.0)
NCCL_LARGE_MIB = nccllog.LARGE_MIB


@dataclass(frozen=True)
class AllReduceOptions:
    port: int = 36000  # the launcher's master; gloo gets port+1, the ranks port+2..port+2+nproc
    sizes_mib: tuple[float, ...] = DEFAULT_SIZES_MIB
    iters: int = 5
    timeout: float = 600.0  # launchers started -> results, at most (--allreduce-timeout)
    budget_s: float = 30.0  # what the collectives may take, predicted from the slowest link
    # From network/budget.py: the time the collectives get once every rank joined (None: up
    # to the timeout) and the predicted time of the largest single collective.
    collective_s: Optional[float] = None
    op_s: float = 0.0
    # Before every rank joined, the run is cut when nothing progressed for this long
    # (network/budget.py sizes it from the Paddle import the probe measured).
    launch_idle_s: float = LAUNCH_IDLE_S
    poll_s: float = 2.0  # how often the controller reads every host's progress


@dataclass(frozen=True)
class Member:
    """A host taking part: how to reach it and how to launch on it."""

    name: str
    remote: Remote
    python: str
    ip: str  # the address the launcher advertises (--host)
    nproc: int = 1
    gloo_ifname: Optional[str] = None  # set when the host's own environment does not
    container: Optional[ContainerSpec] = None  # the job's container, where it runs in one
    host_python: str = "python3"  # the host's own (the probe's): unpacks the benchmark


@functools.lru_cache(maxsize=1)
def _packed_script() -> str:
    src = resources.files("preflight.network").joinpath("allreduce_script.py").read_bytes()
    return base64.b64encode(zlib.compress(src, 9)).decode()


_UNPACK = ("import base64,sys,zlib;open(sys.argv[1],'wb').write("
           "zlib.decompress(base64.b64decode(sys.argv[2])))")


def in_running(m: Member) -> bool:
    """Whether m's commands run inside a container already running (named, not started by
    preflight): its filesystem is not the host's, so the run directory lives inside it and
    every command of the run (launch, progress, stop, cleanup) is run there."""
    return m.container is not None and m.container.running


def on_member(m: Member, script: str) -> str:
    """The command that runs the shell script for m: on the host, or inside its running
    container through the runtime's exec."""
    if in_running(m):
        assert m.container is not None
        return command(exec_argv(m.container, ["sh", "-c", script]))
    return "sh -c " + shlex.quote(script)


def host_command(m: Member, rank: int, members: Sequence[Member], opts: AllReduceOptions,
                 run_dir: str) -> str:
    """Returns the one command run on a host; every value is quoted."""
    q = shlex.quote
    master = f"{members[0].ip}:{opts.port}"
    env = ["NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET",  # which transport NCCL chose
           # With --master the launcher takes its rank ports (and rank 0's store) at random
           # from PORT_RANGE, not from --start_port: keep them in the range checked free.
           f"PORT_RANGE={opts.port + 2}:{opts.port + 2 + m.nproc}"]
    if m.gloo_ifname:
        env.append(f"GLOO_SOCKET_IFNAME={m.gloo_ifname}")
    launch = [m.python, "-m", "paddle.distributed.launch", "--master", master,
              "--nnodes", str(len(members)), "--rank", str(rank),
              "--nproc_per_node", str(m.nproc), "--host", m.ip, "--max_restart", "0",
              "--gloo_port", str(opts.port + 1),
              "--job_id", "preflight", "--log_dir", f"{run_dir}/log",
              f"{run_dir}/allreduce.py", "--sizes", ",".join(f"{s:g}" for s in opts.sizes_mib),
              "--iters", str(opts.iters), "--dir", run_dir]  # last: see stop_pattern
    inner = ["env", *env, *launch]
    unpack = m.python  # on the host, or inside a running container: where the launcher runs
    if m.container is not None and not in_running(m):
        # In the job's container, started as the job's, the run directory shared with the
        # host: the script goes in and the progress and logs come out through it.
        box = replace(m.container, mounts=(*m.container.mounts, f"{run_dir}:{run_dir}"))
        inner = run_argv(box, inner, name=run_dir.rsplit("/.", 1)[-1])
        unpack = m.host_python
    run = " ".join(q(a) for a in inner)
    d = q(run_dir)
    script = "\n".join([
        f"mkdir -m 700 {d} || exit 96",
        f"cd {d} || exit 96",
        f"{q(unpack)} -c {q(_UNPACK)} {d}/allreduce.py {_packed_script()} || exit 95",
        f"if command -v timeout >/dev/null 2>&1; then timeout -k 3 "
        f"{int(opts.timeout + HOST_EXTRA_S)} {run} > {d}/launch.log 2>&1; "
        f"else {run} > {d}/launch.log 2>&1; fi",
        "rc=$?",
        P.status_script(run_dir),
        hints_script(run_dir),
        f"if [ $rc -ne 0 ]; then tail -q -n {LOG_LINES} {d}/log/workerlog.0 {d}/launch.log "
        f"2>/dev/null | sed 's/^/{LOG}/'; fi",
        "exit $rc",
    ])
    return on_member(m, script)


def hints_script(run_dir: str) -> str:
    """Prints NCCL's lines on the network it chose, once each whatever the number of ranks
    (the "host:pid:tid [rank] NCCL INFO " prefix dropped), as hints."""
    lines = f"sed -n 's/^.*NCCL INFO //p' {shlex.quote(run_dir)}/log/workerlog.* 2>/dev/null"
    # The choice first, so that a long list of plugin attempts cannot push it out.
    return (f"{{ {lines} | grep -E {shlex.quote(nccllog.CHOSEN)} | sort -u | head -n 2; "
            f"{lines} | grep -E {shlex.quote(nccllog.TRIED)} | awk '!seen[$0]++' "
            f"| head -n 6; }} | sed 's/^/{HINT}/'")


def kill_pattern(run_dir: str) -> str:
    """Returns a pkill pattern for every process of the run, the host command's own shell
    included, that the killing shell itself lacks: `[.]` matches the dot of the directory
    name but not the pattern's own text."""
    return "[.]" + run_dir.rsplit("/.", 1)[1] + "/"


def stop_pattern(run_dir: str) -> str:
    """Returns a pkill pattern for what runs the benchmark: the launcher, its ranks and what
    wraps them (`timeout`, a container runtime), each of whose command lines ends with
    `--dir <run dir>`. The host command's shell holds that text mid-script, not at its end:
    stopped, the shell lives on to print the ranks' last progress, the NCCL hints and the
    log's tail, which the findings of a stopped run quote."""
    head, tail = run_dir.rsplit("/.", 1)
    return f"[-]-dir {head}/[.]{tail}$"


def stop_command(run_dir: str) -> str:
    pat = shlex.quote(stop_pattern(run_dir))
    return (f"sh -c {shlex.quote(f'pkill -TERM -f {pat}; sleep 1; pkill -KILL -f {pat}; true')}")


def cleanup_command(run_dir: str) -> str:
    pat = shlex.quote(kill_pattern(run_dir))
    return "sh -c " + shlex.quote(f"pkill -KILL -f {pat}; rm -rf {shlex.quote(run_dir)}; true")


# stop_command and cleanup_command inside a running container, with its python: a job's
# image need not have pkill (procps), and a process exec'd there outlives a runtime client
# killed on the host. Matches as pkill -f does (the command line, arguments joined by spaces).
_KILL_PY = """import os,re,shutil,signal,sys,time
pat=re.compile(sys.argv[1])
def hits():
    for p in os.listdir('/proc'):
        if not p.isdigit() or int(p)==os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline'%p,'rb') as f:
                cmd=f.read().replace(b'\\0',b' ').decode('utf-8','replace').strip()
        except OSError:
            continue
        if pat.search(cmd):
            yield int(p)
def kill(sig):
    for p in hits():
        try:
            os.kill(p,sig)
        except OSError:
            pass
for sig in sys.argv[3].split(','):
    if sig=='wait':
        time.sleep(1)
    else:
        kill(getattr(signal,sig))
if sys.argv[2]:
    shutil.rmtree(sys.argv[2],ignore_errors=True)
"""


def _kill_inside(m: Member, pattern: str, steps: str, remove: str = "") -> str:
    assert m.container is not None
    return command(exec_argv(m.container, [m.python, "-c", _KILL_PY, pattern, remove, steps]))


def member_stop(m: Member, run_dir: str) -> str:
    """The stop of m's run (TERM, then KILL a second later): on the host, or inside the
    running container its run is in."""
    if in_running(m):
        return _kill_inside(m, stop_pattern(run_dir), "SIGTERM,wait,SIGKILL")
    return stop_command(run_dir)


def member_cleanup(m: Member, run_dir: str) -> str:
    """Kills what is left of m's run and removes its run directory, where the run was."""
    if in_running(m):
        return _kill_inside(m, kill_pattern(run_dir), "SIGKILL", run_dir)
    return cleanup_command(run_dir)


def redact(line: str) -> str:
    return _SECRET.sub(lambda m: m.group(1) + "=***", line)


def log_lines(done: Done, stopped: bool = False) -> list[str]:
    """The log lines a host command printed (redacted), Paddle's launcher chatter left out.
    stopped: the host's launcher was stopped by the run, so the shell's report of the
    signals it sent ("Terminated", "Killed") is the run's doing, not the host's."""
    lines = [redact(ln[len(LOG):].strip()) for ln in done.stdout.splitlines()
             if ln.startswith(LOG) and ln[len(LOG):].strip()]
    return [ln for ln in lines if not ln.startswith("LAUNCH INFO")
            and not (stopped and _STOP_REPORT.search(ln))]


def log_reason(done: Done, stopped: bool = False) -> str:
    """Returns the line of a failing rank's log that says why, or its exit."""
    lines = log_lines(done, stopped)
    why = [ln for ln in lines if _WHY.search(ln)]
    text = (why or lines or [done.tail()])[-1][:300]
    if done.exit == 96:
        text = "could not create the run directory in /tmp"
    elif done.exit == 95:
        text = f"could not unpack the benchmark with the host's python: {done.tail()}"
    elif done.exit == 124:
        text = f"did not finish within the time limit; log: {text}"
    return text


def status_command(m: Member, run_dir: str) -> str:
    return on_member(m, P.status_script(run_dir))


@dataclass
class Watch:
    """What the controller saw: how the run stopped (kind), the hosts it names and why, and
    the last progress of every host (None: no status from it yet)."""

    progress: dict[str, Optional[P.HostProgress]]
    # ended, failed, never-joined, stalled, slow, stall, out-of-time, timeout
    kind: str = "ended"
    named: dict[str, str] = field(default_factory=dict)
    launch_s: Optional[float] = None
    idle_s: Optional[float] = None
    deadline_s: Optional[float] = None  # the deadline that cut the run, from the launch
    best: dict[tuple[str, ...], int] = field(default_factory=dict)  # P.marks' highest
    moved_at: float = 0.0  # seconds from the launch when a mark last rose

    def moved(self, nproc: Mapping[str, int], elapsed: float) -> None:
        """Notes the time when any of the run's counts rose above its highest so far."""
        for key, value in P.marks(self.progress, nproc).items():
            if value > self.best.get(key, -1):
                self.best[key] = value
                self.moved_at = elapsed


# (what, done, total): how far a long phase got, for a progress bar.
OnProgress = Callable[[str, int, int], None]


def progress_of(progress: Mapping[str, Optional[P.HostProgress]], nproc: Mapping[str, int],
                n_sizes: int) -> tuple[str, int, int]:
    """How far the all-reduce got: hosts at the rendezvous until all joined, then the message
    sizes every rank has finished."""
    joined = sum(1 for h, p in progress.items() if p is not None
                 and p.stage(nproc.get(h, 1)) >= P.JOINED)
    if joined < len(nproc):
        return "hosts joined", joined, len(nproc)
    done = min((len(r.sizes) for p in progress.values() if p is not None for r in p.ranks),
               default=0)
    return "message sizes done", min(done, n_sizes), n_sizes


def run_dirs(members: Sequence[Member]) -> dict[str, str]:
    """Returns each host's run directory: the run's random name plus the host's rank, so that
    hosts sharing a /tmp each make, stop and remove only their own."""
    run = f"/tmp/.preflight-ar-{secrets.token_hex(8)}"
    return {m.name: f"{run}-{rank}" for rank, m in enumerate(members)}


def run_allreduce(members: Sequence[Member], backend: Backend, opts: AllReduceOptions,
                  on_progress: Optional[OnProgress] = None) -> AllReduce:
    """Returns the all-reduce's figures, or which hosts kept it from finishing and why."""
    started = time.monotonic()
    dirs = run_dirs(members)
    ranks = sum(m.nproc for m in members)
    names = tuple(m.name for m in members)
    results: dict[str, Done] = {}
    order: list[str] = []  # hosts in the order their command ended
    lock = threading.Lock()

    def one(rank: int, m: Member) -> None:
        try:
            done = m.remote.run(host_command(m, rank, members, opts, dirs[m.name]),
                                timeout=opts.timeout + HOST_EXTRA_S + 15)
        except Exception as e:
            done = Done(-1, "", f"{type(e).__name__}: {e}")
        with lock:
            results[m.name] = done
            order.append(m.name)

    threads = [threading.Thread(target=one, args=(i, m), daemon=True, name=f"ar-{m.name}")
               for i, m in enumerate(members)]
    watch = Watch({m.name: None for m in members})
    try:
        for t in threads:
            t.start()
        _watch(members, threads, results, lock, opts, dirs, started, watch, on_progress)
        with lock:
            ended = list(order)  # what ended by itself; the rest is stopped below
        if watch.kind != "ended" or len(ended) < len(members):
            _stop_all(members, dirs)
            end = time.monotonic() + 8.0  # the stopped commands still print their logs
            for t in threads:
                t.join(max(0.0, end - time.monotonic()))
    finally:
        _cleanup(members, dirs)
    wall = time.monotonic() - started
    with lock:
        results = dict(results)
    return _summarise(members, backend, ranks, names, results, ended, opts, wall, watch)


def _poll(members: Sequence[Member], dirs: Mapping[str, str], watch: Watch) -> None:
    """Reads every host's progress; a host that does not answer keeps its last status."""

    def one(m: Member) -> None:
        try:
            done = m.remote.run(status_command(m, dirs[m.name]), timeout=8.0)
        except Exception:
            return  # no news from it this time; its command's own end will tell
        status = P.parse_status(done.stdout)
        if status is not None:
            watch.progress[m.name] = status

    in_parallel([functools.partial(one, m) for m in members], 10.0, "ar-poll")


def _watch(members: Sequence[Member], threads: Sequence[threading.Thread],
           results: Mapping[str, Done], lock: threading.Lock, opts: AllReduceOptions,
           dirs: Mapping[str, str], started: float, watch: Watch,
           on_progress: Optional[OnProgress] = None) -> None:
    """Waits for every host's command, polling progress, until the run ends by itself or
    one of its deadlines decides how it stopped (watch.kind)."""
    nproc = {m.name: m.nproc for m in members}
    hard = started + opts.timeout + HOST_EXTRA_S + 20
    joined_at: Optional[float] = None
    failed_at: Optional[float] = None
    next_poll = started + min(opts.poll_s, 1.0)
    while time.monotonic() < hard and any(t.is_alive() for t in threads):
        now = time.monotonic()
        with lock:
            # The host's `timeout` (exit 124) ending a launcher is a deadline, not a failure.
            failed = any(not d.ok and d.exit != 124 and not finished_anyway(
                d, watch.progress.get(n), nproc[n]) for n, d in results.items())
        if failed:
            failed_at = now if failed_at is None else failed_at
            if now - failed_at > GRACE_S:
                watch.kind = "failed"
                return
        elif now >= next_poll:
            _poll(members, dirs, watch)
            if on_progress:
                on_progress(*progress_of(watch.progress, nproc, len(opts.sizes_mib)))
            now = time.monotonic()
            next_poll = now + opts.poll_s
            watch.moved(nproc, now - started)
            if _decide(watch, nproc, opts, now - started, joined_at):
                return
            if joined_at is None and P.all_joined(watch.progress, nproc):
                joined_at = now - started
                watch.launch_s = joined_at
        time.sleep(0.05)
    if any(t.is_alive() for t in threads):
        watch.kind = "timeout"


def _decide(watch: Watch, nproc: Mapping[str, int], opts: AllReduceOptions, elapsed: float,
            joined_at: Optional[float]) -> bool:
    """Sets how the run stops from the latest progress; False: let it go on."""
    progress = watch.progress
    stopped = P.stale(progress)
    if stopped:
        watch.kind, watch.named = "stalled", stopped
        return True
    if joined_at is None and not P.all_joined(progress, nproc):
        idle = elapsed - watch.moved_at
        if idle < opts.launch_idle_s and elapsed < opts.timeout:
            return False
        watch.deadline_s = elapsed
        if idle < opts.launch_idle_s:
            # Its own time limit, not the cluster: the ranks still moved on a moment ago.
            watch.kind, watch.idle_s = "out-of-time", idle
            return True
        watch.idle_s = idle
        watch.named = P.behind(progress, nproc)
        watch.kind = "never-joined" if watch.named else "stall"
        return True
    if P.all_done(progress, nproc):
        return False  # the launchers are exiting
    joined = joined_at if joined_at is not None else elapsed
    deadline = opts.timeout if opts.collective_s is None else min(
        opts.timeout, joined + opts.collective_s)
    if elapsed < deadline:
        return False
    watch.deadline_s = deadline
    watch.idle_s = P.idle_s(progress)
    window = max(STALL_WINDOW_S, 3 * opts.op_s)
    watch.kind = "slow" if watch.idle_s is not None and watch.idle_s < window else "stall"
    return True


def _on_all(members: Sequence[Member], commands: Mapping[str, str]) -> None:
    in_parallel([functools.partial(_quiet_run, m.remote, commands[m.name]) for m in members],
                10.0, "ar-stop")


def _quiet_run(remote: Remote, command: str) -> None:
    try:
        remote.run(command, timeout=8.0)
    except Exception:
        pass  # a host that is gone has nothing left to stop


def _stop_all(members: Sequence[Member], dirs: Mapping[str, str]) -> None:
    _on_all(members, {m.name: member_stop(m, dirs[m.name]) for m in members})


def _cleanup(members: Sequence[Member], dirs: Mapping[str, str]) -> None:
    _on_all(members, {m.name: member_cleanup(m, dirs[m.name]) for m in members})


def finished_anyway(done: Done, progress: Optional[P.HostProgress], nproc: int) -> bool:
    """A command that ended with no exit status (its SSH connection or session went) after
    the progress read from its host showed every local rank finished: the measurement is
    whole, and a connection lost at the end is no fault of the collective path."""
    return (done.exit == -1 and progress is not None and len(progress.ranks) >= nproc
            and all(r.done for r in progress.ranks))


def _sizes(r: Optional[P.RankProgress], ranks: int) -> tuple[SizeResult, ...]:
    return () if r is None else tuple(SizeResult(b, s, ranks) for b, s in r.sizes)


def _summarise(members: Sequence[Member], backend: Backend, ranks: int, names: tuple[str, ...],
               results: Mapping[str, Done], ended: Sequence[str], opts: AllReduceOptions,
               wall: float, watch: Watch) -> AllReduce:
    """ended: the hosts whose command ended by itself, in order; the others were stopped."""
    hints = {n: "; ".join(dict.fromkeys(
        ln[len(HINT):].strip()[-160:] for ln in d.stdout.splitlines() if ln.startswith(HINT)))
        for n, d in results.items()}
    hints = {n: h for n, h in hints.items() if h}
    progress = dict(watch.progress)
    for n, d in results.items():  # what a host printed as its command ended is the latest
        final = P.parse_status(d.stdout)
        if final is not None:
            progress[n] = final
    nproc = {m.name: m.nproc for m in members}
    lost = [n for n, d in results.items() if finished_anyway(d, progress.get(n), nproc[n])]
    results = {n: replace(d, exit=0) if n in lost else d for n, d in results.items()}
    for n in lost:  # ended well; said so beside its hints
        hints[n] = "; ".join(filter(None, [hints.get(n), "its ranks finished; the SSH "
                                           "connection went before the exit status came"]))
    r0 = P.rank0(progress)
    if r0 is not None and r0.world:
        ranks = r0.world
    planned = backend
    backend = (r0.backend if r0 is not None and r0.backend else backend)
    base = AllReduce(backend, names, ranks, logs=hints, wall_s=wall, launch_s=watch.launch_s,
                     progress={n: P.summary(progress.get(n), nproc[n]) for n in names},
                     expected=planned)
    failed_first = [n for n in ended if not results[n].ok and results[n].exit != 124]
    stopped = [n for n in names if n not in ended]
    kind = watch.kind
    if kind == "ended" and any(not d.ok for d in results.values()):
        kind = "timeout"  # the hosts' own `timeout` ended it: the controller never decided
    if failed_first and kind in ("failed", "ended", "timeout"):
        # The first rank to fail is the culprit; the others failed or were stopped after it.
        culprit = failed_first[0]
        return replace(base, error=(
            f"the rank on {culprit} failed first" + (
                f"; stopped the launcher on {', '.join(stopped)}" if stopped else "")),
            failed={n: log_reason(results[n]) for n in failed_first}, outcome="failed")
    if kind == "out-of-time":
        joined = sum(1 for n, p in progress.items() if p is not None
                     and p.stage(nproc[n]) == P.JOINED)
        return replace(base, error=(
            f"ran out of its {opts.timeout:.0f} s time limit while the ranks still progressed "
            f"({joined} of {len(names)} hosts had joined the rendezvous, the last "
            f"progress {watch.idle_s or 0:.0f} s before): nothing to blame on the cluster; "
            "give it more time with --allreduce-timeout"), outcome="out-of-time")
    if kind == "never-joined":
        waited = [n for n in names if n not in watch.named]
        return replace(base, error=(
            f"{', '.join(watch.named)} never joined the rendezvous: nothing progressed for "
            f"{watch.idle_s or 0:.0f} s ({watch.deadline_s:.0f} s after the launch); "
            f"{', '.join(waited)} waited for it: stopped"),
            failed={n: f"never joined the rendezvous: {why}" + _log_of(results.get(n))
                    for n, why in watch.named.items()}, outcome="never-joined")
    if kind == "stalled":
        return replace(base, error=(
            f"{', '.join(watch.named)} stopped progressing; the others waited for it: "
            "stopped"), failed=dict(watch.named), outcome="stalled",
            sizes=_sizes(r0, ranks))
    if kind == "slow":
        done_ops = max((p.ops for p in progress.values() if p is not None), default=0)
        return replace(base, sizes=_sizes(r0, ranks), outcome="slow", cut=(
            f"cut at its {watch.deadline_s:.0f} s deadline while collectives still completed "
            f"({done_ops} done, the last {watch.idle_s or 0:.0f} s before): slower than the "
            "measured links predict"))
    if kind in ("stall", "timeout"):
        at = f"{watch.deadline_s:.0f} s" if watch.deadline_s else f"{opts.timeout:.0f} s"
        idle = ("no progress" if watch.idle_s is None else
                f"no collective completed in the last {watch.idle_s:.0f} s" if _joined_all(
                    watch, nproc) else
                f"no rank progressed towards the rendezvous for {watch.idle_s:.0f} s")
        return replace(base, error=(
            f"stalled at its {at} deadline: {idle}, and no rank stopped or fell behind the "
            "others: nothing to blame on one host (a path between hosts, a firewall, the "
            "interface the ranks bound to?)"), outcome="stall", sizes=_sizes(r0, ranks))
    sizes = _sizes(r0, ranks)
    if not sizes:
        return replace(base, error="every rank exited 0 but rank 0 reported no result",
                       outcome="failed")
    return replace(base, sizes=sizes)


def _joined_all(watch: Watch, nproc: Mapping[str, int]) -> bool:
    """Whether every rank had joined: the stall was in the collectives, not the launch."""
    return watch.launch_s is not None or P.all_joined(watch.progress, nproc)


def _log_of(done: Optional[Done]) -> str:
    """What a stopped host's log said last, as a suffix; where it holds nothing but Paddle's
    launcher's own lines, the last of those (how far the launcher got: the step it hung in);
    "" where it said nothing."""
    if done is None:
        return ""
    if log_lines(done, stopped=True):
        return f"; its log last said: {log_reason(done, stopped=True)}"
    said = launcher_last(done)
    return f"; its launcher last said: {said}" if said else ""


def launcher_last(done: Done) -> str:
    """The last line Paddle's launcher printed (redacted), its level and time dropped; ""
    where it printed none."""
    for ln in reversed(done.stdout.splitlines()):
        m = _LAUNCHER_LINE.match(ln[len(LOG):].strip()) if ln.startswith(LOG) else None
        if m and m.group(1).strip("-= "):
            return redact(m.group(1))[:300]
    return ""
