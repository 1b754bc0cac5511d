"""Where a test's time goes: a ledger of each test's wall seconds, and of the CPU seconds its
processes used, by what was running (the rig being built or taken down, sshd starting,
Paddle's import in the probe, a job's ranks, iperf3, the watch, ...).

With PREFLIGHT_TIMINGS=DIR set (scripts/test.sh sets it to test-results/), each pytest process
samples, every TICK_S, the processes of its lane (its cpuset cgroup, which holds everything
it started, the simulated hosts' sshd and what they run included) or, outside a lane, its own
descendants, and charges the tick to the first activity of ACTIVITIES found among them (the
rig's own steps, timed around the testbed's methods, first of all), or to the test's own code
and waits where none is. At its end it writes DIR/timings-<pid>.json; scripts/timings.py adds
the files up into the table docs/development.md shows."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Optional

from preflight.report.jsonreport import write_text_atomic

TICK_S = 0.5
ENV = "PREFLIGHT_TIMINGS"
# (activity, words of which one in a process's command line marks it), first match wins: the
# more specific a cost, the earlier. The daemons that live as long as a testbed (sshd,
# slurmd, munged) are no activity of a test's.
ACTIVITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("paddle import", ("PREFLIGHT-PADDLE-JSON:",)),
    ("all-reduce", ("/.preflight-ar-",)),
    ("ps round", ("/.preflight-ps-",)),
    ("iperf3", ("iperf3 -c", "iperf3 -s")),
    ("job", ("paddle.distributed.launch", "train")),
    ("podman", ("podman ", "conmon", "runc ")),
    ("slurm", ("srun ", "sbatch", "slurmstepd", "salloc", "scontrol")),
    ("probe", ("zlib.decompress(sys.stdin",)),
    ("watch", (" watch ", "sampler")),
    ("preflight", ("-m preflight", "bin/preflight")),
)
UNMARKED = "test's own"

_rig_activity: list[str] = []  # the rig step under way (a stack: sshd start inside rig up)


def rig_step(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, charged to name while it runs (the sampler reads the innermost step)."""
    def timed(*args: Any, **kw: Any) -> Any:
        _rig_activity.append(name)
        try:
            return fn(*args, **kw)
        finally:
            _rig_activity.pop()
    timed.__wrapped__ = fn  # type: ignore[attr-defined]
    return timed


def activity_of(cmdlines: list[str]) -> str:
    """The first of ACTIVITIES that one of cmdlines shows, else UNMARKED."""
    for name, words in ACTIVITIES:
        if any(w in c for c in cmdlines for w in words):
            return name
    return UNMARKED


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(1 << 18).replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _cpu_ticks(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return 0


def _descendants(root: int) -> list[str]:
    children: dict[str, list[str]] = defaultdict(list)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                ppid = fh.read().rsplit(")", 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        children[ppid].append(pid)
    out, todo = [], [str(root)]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


class Ledger:
    """Samples this process's lane until stopped; charges each tick to the test running."""

    def __init__(self, directory: str, lane: Optional[str]) -> None:
        self.path = os.path.join(directory, f"timings-{os.getpid()}.json")
        self.lane = lane
        self.wall: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.cpu: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.last_ticks: dict[str, int] = {}
        self.hz = os.sysconf("SC_CLK_TCK")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="timeledger", daemon=True)
        self.thread.start()

    def _pids(self) -> list[str]:
        if self.lane:
            try:
                with open(os.path.join(self.lane, "cgroup.procs")) as fh:
                    return fh.read().split()
            except OSError:
                pass
        return _descendants(os.getpid())

    def _run(self) -> None:
        last = time.monotonic()
        while not self.stop.wait(TICK_S):
            now = time.monotonic()
            test = os.environ.get("PYTEST_CURRENT_TEST")
            test = test.rsplit(" ", 1)[0] if test else "(between tests)"  # less " (call)"
            pids = [p for p in self._pids() if p != str(os.getpid())]
            lines = {p: _cmdline(p) for p in pids}
            rig = _rig_activity[-1] if _rig_activity else None
            self.wall[test][rig or activity_of(list(lines.values()))] += now - last
            last = now
            ticks = {p: _cpu_ticks(p) for p in pids}
            for p, t in ticks.items():
                # A process new since the last tick: all it used, it used since (or
                # nearly). One that began and ended between two ticks is not seen.
                used = t - self.last_ticks.get(p, 0)
                if used > 0:
                    self.cpu[test][rig or activity_of([lines[p]])] += used / self.hz
            self.last_ticks = ticks

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        doc = {t: {"wall": {k: round(v, 2) for k, v in self.wall[t].items()},
                   "cpu": {k: round(v, 2) for k, v in self.cpu.get(t, {}).items()}}
               for t in self.wall}
        write_text_atomic(self.path, json.dumps(doc, indent=1, sort_keys=True))


def install(lane: Optional[str]) -> Optional[Ledger]:
    """A ledger for this process where PREFLIGHT_TIMINGS names a directory, with the
    testbed's steps timed; None where it does not."""
    # Taken out of the environment: a pytest run a test starts is that test's time.
    directory = os.environ.pop(ENV, None)
    if not directory:
        return None
    from preflight.testing import testbed
    tb = testbed.Testbed
    if not hasattr(tb._build, "__wrapped__"):
        tb._build = rig_step("rig up", tb._build)  # type: ignore[method-assign]
        tb.start_sshd = rig_step("sshd start", tb.start_sshd)  # type: ignore[method-assign]
        tb.wait_listening = rig_step("sshd start",  # type: ignore[method-assign]
                                     tb.wait_listening)
        tb.close = rig_step("rig down", tb.close)  # type: ignore[method-assign]
    os.makedirs(directory, exist_ok=True)
    return Ledger(directory, lane)
