"""Lanes: each pytest-xdist worker, and everything it starts (the CLI, the simulated hosts'
sshd and all they run: iperf3, Paddle's ranks, slurmd, Podman's containers), runs on CPUs of
its own, a cgroup v1 cpuset. Two modules then run side by side without one's load showing in
the other's judgement: a simulated host's probe and the watch's sampler read their affinity
(its CPUs' busy share), and a PS round compares trainers that share one lane's CPU.

A cpuset rather than sched_setaffinity: a process moved into another cgroup of the cpuset
hierarchy (runc puts each container in one) gets that cpuset's CPUs, whatever its affinity
was; Podman's cgroupfs parent is given the lane's CPUs for that (rig/containers.py)."""

from __future__ import annotations

import os
import time
from typing import Optional

from preflight.hostside.probe_cpu import cpu_list
from preflight.testing.rig.system import CGROUP_CPUSET as CPUSET
from preflight.testing.rig.system import own_cpuset

PREFIX = "preflight-lane-"


def share(index: int, count: int, cpus: list[int]) -> list[int]:
    """The CPUs of lane index of count: an equal slice of cpus, the last taking what is
    left; all of them where there are fewer CPUs than lanes."""
    cpus = sorted(cpus)
    if count < 2 or len(cpus) < count:
        return cpus
    size = len(cpus) // count
    return cpus[index * size:] if index == count - 1 else cpus[index * size:(index + 1) * size]


def remove_stale() -> None:
    """Removes the empty lanes of earlier runs whose worker is gone (a run killed with -9)."""
    if not os.path.isdir(CPUSET):
        return
    for name in os.listdir(CPUSET):
        if name.startswith(PREFIX) and not os.path.exists(f"/proc/{name[len(PREFIX):]}"):
            try:
                os.rmdir(os.path.join(CPUSET, name))
            except OSError:
                pass  # a process still in it: left for the run after


def enter(index: int, count: int) -> Optional[str]:
    """Moves this process into a lane of its own: a cpuset with its share of the CPUs (else
    its affinity, without a cpuset hierarchy). Returns the cpuset's directory, or None."""
    cpus = share(index, count, sorted(os.sched_getaffinity(0)))
    parent = own_cpuset()
    if parent is None or not os.path.isdir(parent):
        os.sched_setaffinity(0, cpus)
        return None
    remove_stale()
    path = os.path.join(CPUSET, f"{PREFIX}{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(parent, "cpuset.mems")) as fh:
        mems = fh.read().strip()
    with open(os.path.join(path, "cpuset.mems"), "w") as fh:
        fh.write(mems)
    with open(os.path.join(path, "cpuset.cpus"), "w") as fh:
        fh.write(cpu_list(sorted(cpus)))
    with open(os.path.join(path, "cgroup.procs"), "w") as fh:
        fh.write(str(os.getpid()))
    return path


def current() -> Optional[str]:
    """The lane this process runs in (its cpuset directory), or None outside a lane."""
    own = own_cpuset()
    return own if own and os.path.basename(own).startswith(PREFIX) else None


def leave(path: str) -> None:
    """Moves this process, and whatever it left running in the lane (a process still ending),
    back to the root cpuset, and removes the lane (bounded; one left behind is removed by
    the next run)."""
    end = time.monotonic() + 5
    while True:
        try:
            with open(os.path.join(path, "cgroup.procs")) as fh:
                left = fh.read().split()
            for pid in [str(os.getpid()), *left]:
                try:
                    with open(os.path.join(CPUSET, "cgroup.procs"), "w") as fh:
                        fh.write(pid)
                except OSError:
                    pass  # it ended meanwhile
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                return
            time.sleep(0.1)
