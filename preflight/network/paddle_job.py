"""One Paddle job that preflight starts on its hosts (the all-reduce, the PS round): who
takes part (Member), the command that writes its shipped script into a fresh private run
directory and runs Paddle's launcher under the host's `timeout` (in the job's container where
it runs in one), and its stop and cleanup, every process signal sent from here (also the
stop of a job `preflight launch` started, and of the port reach's listeners). Every value is
quoted; a run directory's unique name is how each host's processes are found, so that hosts
sharing a /tmp (several slurmd on one machine, a shared scratch) neither collide nor stop or
remove each other's."""

from __future__ import annotations

import functools
import math
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Optional

from preflight.common.containercmd import command, exec_argv, run_argv
from preflight.common.remote import Remote, in_parallel
from preflight.hostside import ship
from preflight.model.container import ContainerSpec

# What a host's command prints of its job's log when the job failed, a line each.
LOG = "PREFLIGHT-LOG "
# The host's own `timeout` is the net under the controller (which may be killed): it fires
# this much after the controller's last deadline, so that the controller decides first.
HOST_EXTRA_S = 10.0


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
    host_python: str = "python3"  # the host's own (the probe's): writes the script


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


def launch_script(m: Member, run_dir: str, inner: Sequence[str], script: tuple[str, str],
                  timeout: float, after: Sequence[str], before: Sequence[str] = ()) -> str:
    """The command that runs a shipped script on m with Paddle's launcher: a fresh private
    run directory, the script (hostside's part, the name it takes there) written there, the
    shell lines `before`, `inner` (the launcher's command line, ending with `--dir <run
    dir>`) under the host's `timeout` (in the job's container, started as the job's, where it
    runs in one), then the shell lines `after` with its exit code in $rc; every value
    quoted."""
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
    writer = ship.file_writer(unpack, f"{run_dir}/{script[1]}", ship.script(script[0]))
    lines = "\n".join([
        f"mkdir -m 700 {d} || exit 96",
        f"cd {d} || exit 96",
        f"{shlex.join(writer)} || exit 95",
        *before,
        f"if command -v timeout >/dev/null 2>&1; then timeout -k 3 "
        f"{int(timeout + HOST_EXTRA_S)} {run} > {d}/launch.log 2>&1; "
        f"else {run} > {d}/launch.log 2>&1; fi",
        "rc=$?",
        *after,
        "exit $rc",
    ])
    return on_member(m, lines)


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


def stop_marked(entry: str, wait_s: float, gone_s: float) -> str:
    """The command that stops every process whose environment holds entry (NAME=value, as
    `preflight launch` marks every process of its job): TERM, then KILL those left after
    wait_s, then waits up to gone_s for the KILLed to be gone; prints "stopped N" (how many it
    found), after "exiting M" where M outlived that wait. Shell only, run on the host: a
    container's processes are the host's too, and the host need not have Python where the
    job runs in one."""
    match = shlex.quote(entry)
    # One grep over every process's environment, not one a process: a host runs thousands,
    # and a grep forked for each took seconds a scan on a busy or CPU-limited host, which
    # made the wait, counted in scans, outlast the caller's time limit. The wait is counted
    # on the clock.
    script = (
        f"found() {{ grep -lsxzF -e {match} /proc/[0-9]*/environ | "
        "sed -e 's#^/proc/##' -e 's#/environ$##'; }; "
        "pids=$(found); n=$(echo $pids | wc -w); "
        "[ -n \"$pids\" ] && kill -TERM $pids 2>/dev/null; "
        f"end=$(($(date +%s) + {max(1, math.ceil(wait_s))})); "
        "while [ \"$(date +%s)\" -lt \"$end\" ] && [ -n \"$(found)\" ]; do sleep 0.2; done; "
        "left=$(found); [ -n \"$left\" ] && kill -KILL $left 2>/dev/null; "
        # A KILLed process is gone only once the kernel has run its exit, which a CPU quota
        # that starves its cgroup holds back (a thousandth of a core: seen 0.6-3.7 s; a
        # frozen cgroup, a paused container on cgroup v1: until thawed), and until then it
        # keeps its ports and its GPU memory from the job that follows. Its
        # environment is unreadable from early in that exit, so the pids are looked at
        # themselves: alive while /proc has them and they are not zombies (a zombie holds
        # nothing).
        "alive() { for p in $left; do [ -r /proc/$p/status ] && "
        "! grep -qs '^State:[[:space:]]*Z' /proc/$p/status && echo $p; done; }; "
        f"end=$(($(date +%s) + {max(1, math.ceil(gone_s))})); "
        "while [ \"$(date +%s)\" -lt \"$end\" ] && [ -n \"$(alive)\" ]; do sleep 0.2; done; "
        "m=$(alive | wc -w); [ \"$m\" -gt 0 ] && echo exiting $m; "
        "echo stopped $n")
    return "sh -c " + shlex.quote(script)


def cleanup_command(run_dir: str) -> str:
    pat = shlex.quote(kill_pattern(run_dir))
    return "sh -c " + shlex.quote(f"pkill -KILL -f {pat}; rm -rf {shlex.quote(run_dir)}; true")


# stop_command and cleanup_command inside a running container are hostside's reaper, with
# the container's python: a job's image need not have pkill (procps), and a process exec'd
# there outlives a runtime client killed on the host.
def kill_matching(python: str, pattern: str, steps: str) -> str:
    """The command that signals every process whose command line matches the regex pattern,
    with nothing but python: steps are signal names, "wait" (a second) and "gone" (until none
    matches, 2 s at most), comma-separated."""
    return shlex.join(ship.inline(python, "reap", pattern, "", steps))


def _kill_inside(m: Member, pattern: str, steps: str, remove: str = "") -> str:
    assert m.container is not None
    return command(exec_argv(m.container, ship.inline(m.python, "reap", pattern, remove, steps)))


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


def run_dirs(members: Sequence[Member], kind: str = "ar") -> dict[str, str]:
    """Returns each host's run directory: the run's random name plus the host's rank, so that
    hosts sharing a /tmp each make, stop and remove only their own."""
    run = f"/tmp/.preflight-{kind}-{secrets.token_hex(8)}"
    return {m.name: f"{run}-{rank}" for rank, m in enumerate(members)}
