"""The commands an all-reduce runs on each host: the one that unpacks the benchmark into a
fresh private run directory and runs Paddle's launcher under the host's `timeout` (in the
job's container where it runs in one), the poll of its progress, its stop and its cleanup.
Every value is quoted; a run directory's unique name is how each host's processes are found,
so that hosts sharing a /tmp (several slurmd on one machine, a shared scratch) neither collide
nor stop or remove each other's."""

from __future__ import annotations

import base64
import functools
import secrets
import shlex
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Optional

from preflight.common import nccllog
from preflight.common.containercmd import command, exec_argv, run_argv
from preflight.common.remote import Remote, in_parallel
from preflight.model.container import ContainerSpec
from preflight.network import progress as P
from preflight.network.budget import LAUNCH_IDLE_S

# What the host command prints besides its progress: its log's tail and NCCL's hints.
LOG, HINT = "PREFLIGHT-LOG ", "PREFLIGHT-HINT "
# The master's port answered before its launcher started: what holds it, and the exit.
HELD, HELD_EXIT = "PREFLIGHT-HELD ", 97
HELD_WAIT_S = 5.0  # a holder on its way out (a stopped listener, a job just ended) may go
# The host's own `timeout` is the net under the controller (which may be killed): it fires
# this much after the controller's last deadline, so that the controller decides first.
HOST_EXTRA_S = 10.0
LOG_LINES = 40
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


# Run on the master's host before its launcher: Paddle's launcher takes anything that
# accepts a connection on its --master port for its master, started no store of its own, and
# every launcher then waits for peers that never register (a job's master left running, a
# process given the port since the ports check). Waits a little for the port; else names
# what listens there (as /proc shows it to this user) after HELD, and exits HELD_EXIT (its
# argv: ip port wait_s HELD_EXIT HELD). Python 3.6+.
_MASTER_FREE = r"""
import os, socket, sys, time
ip, port, end = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
def taken():
    # The listening sockets on the port, from this network namespace's tables (None: free);
    # without them, a connection tells (refused: free), though not who.
    inodes, read = set(), False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        read = True
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % f[9])
    if read:
        return inodes or None
    try:
        socket.create_connection((ip, port), 1.0).close()
    except socket.timeout:  # bound, its backlog full: taken all the same
        pass
    except OSError:
        return None
    return set()
held = taken()
while held is not None and time.time() < end:
    time.sleep(0.2)
    held = taken()
if held is None:
    sys.exit(0)
who = []
for pid in os.listdir("/proc"):
    if not pid.isdigit() or not held:
        continue
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
        if any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) in held for fd in fds):
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            who.append("pid %s: %s" % (pid, cmd[:160]))
    except OSError:
        continue
print("%s%d %s" % (sys.argv[5], port, "; ".join(who[:3]) or "a process this user cannot see"))
sys.exit(int(sys.argv[4]))
"""


@functools.lru_cache(maxsize=4)
def packed(name: str) -> str:
    """A script of preflight.network, compressed and base64-encoded: one shell word."""
    src = resources.files("preflight.network").joinpath(name).read_bytes()
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
    after = [P.status_script(run_dir), hints_script(run_dir),
             f"if [ $rc -ne 0 ]; then tail -q -n {LOG_LINES} {q(run_dir)}/log/workerlog.0 "
             f"{q(run_dir)}/launch.log 2>/dev/null | sed 's/^/{LOG}/'; fi"]
    before: list[str] = []
    # Where the launcher runs in a container of its own, the host's network may not be
    # its: the master's port is checked only where the launcher shares it.
    if rank == 0 and (m.container is None or in_running(m)):
        # Only its verdict stops the launch: a check that could not run (no /proc) does not.
        before.append(f"{q(m.python)} -c {q(_MASTER_FREE)} {q(members[0].ip)} {opts.port} "
                      f"{HELD_WAIT_S:g} {HELD_EXIT} {q(HELD)}; "
                      f"[ $? -ne {HELD_EXIT} ] || exit {HELD_EXIT}")
    return launch_script(m, run_dir, ["env", *env, *launch],
                         ("allreduce_script.py", "allreduce.py"), opts.timeout, after, before)


def launch_script(m: Member, run_dir: str, inner: Sequence[str], script: tuple[str, str],
                  timeout: float, after: Sequence[str], before: Sequence[str] = ()) -> str:
    """The command that runs a shipped script on m with Paddle's launcher: a fresh private
    run directory, the script (preflight.network's file, the name it takes there) unpacked
    there, the shell lines `before`, `inner` (the launcher's command line, ending with
    `--dir <run dir>`) under the host's `timeout` (in the job's container, started as the
    job's, where it runs in one), then the shell lines `after` with its exit code in $rc;
    every value quoted."""
    q = shlex.quote
    unpack = m.python  # on the host, or inside a running container: where the launcher runs
    if m.container is not None and not in_running(m):
        # In the job's container, started as the job's, the run directory shared with the
        # host: the script goes in and the progress and logs come out through it.
        box = replace(m.container, mounts=(*m.container.mounts, f"{run_dir}:{run_dir}"))
        inner = run_argv(box, inner, name=run_dir.rsplit("/.", 1)[-1])
        unpack = m.host_python
    run = " ".join(q(a) for a in inner)
    d = q(run_dir)
    lines = "\n".join([
        f"mkdir -m 700 {d} || exit 96",
        f"cd {d} || exit 96",
        f"{q(unpack)} -c {q(_UNPACK)} {d}/{q(script[1])} {packed(script[0])} || exit 95",
        *before,
        f"if command -v timeout >/dev/null 2>&1; then timeout -k 3 "
        f"{int(timeout + HOST_EXTRA_S)} {run} > {d}/launch.log 2>&1; "
        f"else {run} > {d}/launch.log 2>&1; fi",
        "rc=$?",
        *after,
        "exit $rc",
    ])
    return on_member(m, lines)


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
    elif sig=='gone':
        end=time.time()+2
        while time.time()<end and any(True for _ in hits()):
            time.sleep(0.05)
    else:
        kill(getattr(signal,sig))
if sys.argv[2]:
    shutil.rmtree(sys.argv[2],ignore_errors=True)
"""


def kill_matching(python: str, pattern: str, steps: str) -> str:
    """The command that signals every process whose command line matches the regex pattern,
    with nothing but python: steps are signal names, "wait" (a second) and "gone" (until none
    matches, 2 s at most), comma-separated."""
    return " ".join(shlex.quote(a) for a in (python, "-c", _KILL_PY, pattern, "", steps))


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


def on_all(members: Sequence[Member], commands: Mapping[str, str]) -> None:
    """Runs each member's command (a stop, a cleanup), all at once and bounded; a host that
    is gone has nothing left to stop."""
    def quiet(m: Member) -> None:
        try:
            m.remote.run(commands[m.name], timeout=8.0)
        except Exception:
            pass
    in_parallel([functools.partial(quiet, m) for m in members], 10.0, "stop")


def status_command(m: Member, run_dir: str) -> str:
    return on_member(m, P.status_script(run_dir))


def run_dirs(members: Sequence[Member], kind: str = "ar") -> dict[str, str]:
    """Returns each host's run directory: the run's random name plus the host's rank, so that
    hosts sharing a /tmp each make, stop and remove only their own."""
    run = f"/tmp/.preflight-{kind}-{secrets.token_hex(8)}"
    return {m.name: f"{run}-{rank}" for rank, m in enumerate(members)}
