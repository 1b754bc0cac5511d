"""A process of this machine put in a cgroup of its own for a local test (frozen, or under a
CPU quota), and whether a process still holds anything (alive: neither gone nor a zombie)."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

V1 = Path("/sys/fs/cgroup")


def alive(pid: int) -> bool:
    """pid is there and not a zombie (a zombie holds nothing: no ports, no memory)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """pid frozen in a cgroup of its own on this machine's freezer (cgroup v1's, else
    cgroup2's cgroup.freeze); thawed and put back after."""
    v1 = V1 / "freezer"
    if v1.is_dir():
        cg, back = v1 / f"preflight-test-{os.getpid()}", v1
        cg.mkdir()
        (cg / "cgroup.procs").write_text(str(pid))
        (cg / "freezer.state").write_text("FROZEN")
    else:
        root = next(Path(ln.split(" - ")[0].split()[4]) for ln in
                    Path("/proc/self/mountinfo").read_text().splitlines()
                    if ln.split(" - ")[1].split()[:1] == ["cgroup2"])
        rel = next(ln[3:] for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                   if ln.startswith("0::"))
        back = root / rel.lstrip("/")
        cg = root / f"preflight-test-{os.getpid()}"
        cg.mkdir()
        (cg / "cgroup.procs").write_text(str(pid))
        (cg / "cgroup.freeze").write_text("1")
    try:
        yield
    finally:
        (cg / ("freezer.state" if v1.is_dir() else "cgroup.freeze")).write_text(
            "THAWED" if v1.is_dir() else "0")
        emptied(cg, back)


@contextlib.contextmanager
def cpu_quota(pid: int, period_us: int, quota_us: int) -> Iterator[None]:
    """pid in a cgroup of its own on cgroup v1's cpu controller, allowed quota_us of CPU each
    period_us; put back after."""
    top = V1 / "cpu"
    cg = top / f"preflight-test-quota-{os.getpid()}"
    cg.mkdir()
    try:
        (cg / "cpu.cfs_period_us").write_text(str(period_us))
        (cg / "cpu.cfs_quota_us").write_text(str(quota_us))
        (cg / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        emptied(cg, top)


def emptied(cg: Path, back: Path, wait_s: float = 10.0) -> None:
    """cg's tasks put back and cg removed. The kernel lets go of a cgroup a moment after its
    last task leaves it (a thawing task moves late, a child forked meanwhile lands in it), so
    removal is tried again, bounded, and a cgroup still busy at the end fails the test."""
    end = time.monotonic() + wait_s
    while True:
        for task in (cg / "cgroup.procs").read_text().split():
            try:
                (back / "cgroup.procs").write_text(task)
            except ProcessLookupError:
                pass  # it ended meanwhile
        try:
            cg.rmdir()
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > end:
                raise
        time.sleep(0.05)
