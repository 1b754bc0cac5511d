"""Slurm as the transport, for clusters that allow no SSH to a node without a job there: the
nodes come from the allocation (or preflight holds one of its own), the probe runs on every
node in one job step (`srun --ntasks-per-node=1 --label`, the probe on stdin, each line told
apart by its task's label), and later commands (iperf3, the all-reduce's launchers) run as
steps of the same job through SlurmRemote, a Remote like SshRemote.

A node that cannot run a step (down, drained, not responding) is a finding with Slurm's own
reason, never a wait: every srun is given --immediate and a timeout of ours."""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Optional

from preflight.common.hostjob import PROBE_MARGIN_S, Answer, CollectOptions, ProbeCall
from preflight.common.remote import Done, Started, in_parallel
from preflight.model.container import ContainerSpec
from preflight.model.host import Host, HostFailure, HostOutcome, Stage
from preflight.model.watch import SCHEDULER_GONE
from preflight.transport.local.run import LocalProcess

IMMEDIATE_S = 10  # how long a step may wait for its nodes before it is refused
NODE_MARK, EXIT_MARK = "PREFLIGHT-NODE ", "PREFLIGHT-EXIT "
# srun cuts an output line into 1024-byte pieces, each labelled: a long line cannot be told
# from several. So a task's probe output travels base64-encoded in short lines.
TASK_SCRIPT = """echo "{node}$SLURMD_NODENAME"
out=$({probe}); rc=$?
printf '%s\\n' "$out" | base64 -w 76
echo "{exit}$rc"
"""
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")
# How a drain reason says preflight wrote it (act/drain.py writes them): such a node is
# re-checked over SSH, since Slurm runs no step on a drained node.
PREFLIGHT_REASON = "preflight: "
# Node states (sinfo %T, lower case) in which a node runs no new step; "*" marks one whose
# slurmd does not answer.
UNUSABLE = ("down", "drain", "drained", "draining", "fail", "failing", "maint", "future",
            "powered_down", "power_down", "powering_down", "reboot", "inval", "unknown")


class SlurmError(Exception):
    """Slurm could not be asked or refused us (one line; exit 2 when it is bad input)."""


@dataclass(frozen=True)
class Node:
    name: str
    address: str  # NodeAddr: what its peers connect to
    state: str  # as sinfo %T prints it, e.g. idle, mixed, drained, down*
    reason: str = ""

    @property
    def base_state(self) -> str:
        """The state without sinfo's flag suffixes ("*" not responding, "~" powered off...)."""
        return self.state.rstrip("*~#!%$@^-").lower()

    @property
    def drained_by_preflight(self) -> bool:
        """Drained (or draining) with a reason preflight wrote, its slurmd answering."""
        return (self.base_state.startswith("drain") and not self.state.endswith("*")
                and self.reason.startswith(PREFLIGHT_REASON))

    @property
    def usable(self) -> Optional[str]:
        """Why the node cannot run a step now, or None when it can."""
        base = self.base_state
        if self.state.endswith("*"):
            return f"node {self.state}: slurmd not responding" + (
                f" ({self.reason})" if self.reason and self.reason != "none" else "")
        if any(base.startswith(s) for s in UNUSABLE):
            why = f" ({self.reason})" if self.reason and self.reason != "none" else ""
            return f"node {base}{why}"
        return None


def said(p: subprocess.CompletedProcess[bytes]) -> str:
    """What a Slurm client that failed said, in one line: its last line (a client without a
    controller prints several errors, and its last says what it gave up on), without its own
    name before it; its exit status where it said nothing."""
    lines = [ln.strip() for ln in p.stderr.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return f"exit {p.returncode}"
    last = lines[-1]
    name = os.path.basename(str(p.args[0])) if isinstance(p.args, (list, tuple)) else ""
    if name and last.startswith(name + ": "):
        last = last[len(name) + 2:]
    return last[:300]


def _run(argv: Sequence[str], timeout: float, stdin: Optional[bytes] = None
         ) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(list(argv), input=stdin, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]}: not found (is this a Slurm login node?)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer within {timeout:.0f} s") from None


def nodes(names: Sequence[str], timeout: float = 15.0) -> dict[str, Node]:
    """Asks Slurm for the named nodes: address, state, reason. A name Slurm does not know is
    left out of the answer (the caller says so)."""
    p = _run(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%N|%o|%T|%E"], timeout)
    if p.returncode != 0:
        raise SlurmError(f"sinfo: {said(p)}")
    out: dict[str, Node] = {}
    for line in p.stdout.decode(errors="replace").splitlines():
        parts = line.split("|", 3)
        if len(parts) == 4 and parts[0] not in out:
            out[parts[0]] = Node(parts[0], parts[1] or parts[0], parts[2], parts[3])
    return out


def job_of_name(name: str, running: bool = False, timeout: float = 15.0) -> Optional[str]:
    """The id of the job of that name (preflight names its jobs uniquely), in any state or
    only once it runs; None while Slurm does not list it so."""
    state = ["-t", "R"] if running else []
    p = _run(["squeue", "-h", "-n", name, *state, "-o", "%i"], timeout)
    if p.returncode != 0:
        raise SlurmError(f"squeue: {said(p)}")
    ids = p.stdout.decode(errors="replace").split()
    return ids[0] if ids else None


# What squeue says of a job it no longer lists (ended more than MinJobAge ago).
NO_SUCH_JOB = "Invalid job id"


def job_state(job_id: str, timeout: float = 5.0) -> tuple[str, str]:
    """Slurm's state of the job (squeue's %T: RUNNING, COMPLETING, CANCELLED...) and its
    reason; (SCHEDULER_GONE, why) once Slurm no longer lists it."""
    p = _run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T|%r"], timeout)
    err = p.stderr.decode(errors="replace").strip()
    if p.returncode != 0 and NO_SUCH_JOB not in err:
        raise SlurmError(f"squeue -j {job_id}: {err[:300] or f'exit {p.returncode}'}")
    lines = [ln.strip() for ln in p.stdout.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return SCHEDULER_GONE, "Slurm no longer lists it (it ended longer ago than MinJobAge)"
    state, _, reason = lines[0].partition("|")
    return state, "" if reason in ("None", "(null)") else reason


@dataclass
class Allocation:
    """The job the steps run in: the user's own (inside salloc or sbatch) or one preflight
    asked for and gives back (own)."""

    job_id: str
    own: bool = False

    @classmethod
    def current(cls) -> Optional[Allocation]:
        job = os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID")
        return cls(job) if job else None

    @classmethod
    def request(cls, names: Sequence[str], timeout: float) -> Allocation:
        """Allocates the nodes, one task each, or refuses at once (--immediate)."""
        p = _run(["salloc", "--no-shell", "-J", "preflight", "-w", ",".join(names), "-N",
                  str(len(names)), "--ntasks-per-node=1", f"--immediate={IMMEDIATE_S}"],
                 timeout + IMMEDIATE_S)
        text = p.stderr.decode(errors="replace")
        m = re.search(r"Granted job allocation (\d+)", text)
        if p.returncode != 0 or not m:
            why = " | ".join(text.strip().splitlines()[-2:])[:300] or f"exit {p.returncode}"
            raise SlurmError(f"salloc -w {','.join(names)}: {why}")
        return cls(m.group(1), own=True)

    def close(self) -> None:
        if self.own:
            try:
                _run(["scancel", self.job_id], 15.0)
            except SlurmError:
                pass  # the job's time limit ends it

    def srun(self, names: Sequence[str], *command: str, label: bool = False) -> list[str]:
        """argv of a step on the named nodes, one task each; it shares the job's CPUs with
        the job's other steps (--overlap) and is refused, not queued, when it cannot run."""
        return ["srun", f"--jobid={self.job_id}", "--overlap", "-w", ",".join(names), "-N",
                str(len(names)), "--ntasks-per-node=1", f"--immediate={IMMEDIATE_S}",
                "--kill-on-bad-exit=0", *(["--label"] if label else []), *command]


def split_labelled(text: str) -> dict[int, list[str]]:
    """{task: its lines} of srun --label output."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def decode_task(lines: Sequence[str]) -> tuple[str, Optional[int]]:
    """(the probe's output, its exit status) from a task's base64 lines and its exit line;
    status None when the exit line never came (the step was cut off)."""
    exit_code: Optional[int] = None
    body = []
    for line in lines:
        if line.startswith(EXIT_MARK):
            rest = line[len(EXIT_MARK):].strip()
            exit_code = int(rest) if rest.isdigit() else -1
            break
        body.append(line.strip())
    try:
        text = base64.b64decode("".join(body), validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        text = ""
    return text, exit_code


def stream_step(argv: Sequence[str], payload: bytes, timeout: float,
                ) -> tuple[str, str, Optional[dict[int, float]]]:
    """Runs a labelled step: (its stdout, its stderr, {task: the epoch its exit line
    arrived}), the last None when the step did not end within timeout (it is killed)."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out: list[bytes] = []
    err: list[bytes] = []
    arrived: dict[int, float] = {}
    mark = EXIT_MARK.encode()

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            m = _LABEL.match(line.decode(errors="replace"))
            if m and m.group(2).startswith(EXIT_MARK) and mark in line:
                arrived.setdefault(int(m.group(1)), time.time())

    def read_err() -> None:
        assert proc.stderr is not None
        err.append(proc.stderr.read())

    def write_in() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(payload)
            proc.stdin.close()
        except OSError:
            pass  # the step ended (refused) before reading it

    threads = [threading.Thread(target=fn, daemon=True, name=f"srun-{fn.__name__}")
               for fn in (read_out, read_err, write_in)]
    for t in threads:
        t.start()
    ended: Optional[dict[int, float]] = arrived
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        ended = None
    for t in threads:
        t.join(5.0)  # the pipes close with srun: bounded all the same
    return (b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace"),
            ended)


def probe_step(hosts: Sequence[Host], job: Allocation, opts: CollectOptions, call: ProbeCall
               ) -> list[HostOutcome]:
    """Runs call on every host (Slurm node) in one step; one outcome per host."""
    started = time.monotonic()
    budget = max(1.0, opts.deadline - PROBE_MARGIN_S)
    first = hosts[0]
    script = TASK_SCRIPT.format(node=NODE_MARK, exit=EXIT_MARK,
                                probe=call.script(first, opts, budget))
    argv = job.srun([h.name for h in hosts], "sh", "-c", script, label=True)
    sent = time.time()
    stdout, stderr, arrived = stream_step(argv, call.payload(), opts.deadline + IMMEDIATE_S)
    if arrived is None:
        stderr += f"\nno answer within the {opts.deadline:.0f} s deadline"
    received = time.time()
    elapsed = time.monotonic() - started
    by_task = split_labelled(stdout)
    errs = split_labelled(stderr)
    node_of = {t: lines[0][len(NODE_MARK):].strip() for t, lines in by_task.items()
               if lines and lines[0].startswith(NODE_MARK)}
    task_of = {n: t for t, n in node_of.items()}
    unlabelled = " | ".join(ln for ln in stderr.strip().splitlines()
                            if not _LABEL.match(ln))[-300:]
    outcomes = []
    for h in hosts:
        t = task_of.get(h.name)
        if t is None:
            outcomes.append(HostOutcome(h, failure=HostFailure(
                Stage.PROBE, f"the job step did not run on it: {unlabelled or 'no output'}"),
                elapsed_s=elapsed))
            continue
        text, exit_code = decode_task(by_task[t][1:])
        tail = " | ".join(errs.get(t, [])[-3:])[:300]
        if exit_code != 0:
            why = ("probe ran past its time limit on the node" if exit_code == 124 else
                   "the step ended before the probe did" if exit_code is None else
                   f"probe exited {exit_code}")
            outcomes.append(HostOutcome(h, failure=HostFailure(
                Stage.PROBE, f"{why}: {tail or 'no output'}"), elapsed_s=elapsed))
            continue
        # Each task's own arrival: a fast node's answer does not wait for the slowest
        # node's (its clock would look behind by the difference).
        got = (arrived or {}).get(t, received)
        outcome = call.read(h, Answer(text, sent, got, elapsed))
        if outcome.failure is not None and tail:  # what the node said of it, beside it
            outcome = replace(outcome, failure=replace(
                outcome.failure, reason=f"{outcome.failure.reason}: {tail}"))
        outcomes.append(outcome)
    return outcomes


def collect(hosts: Sequence[Host], opts: CollectOptions, call: ProbeCall,
            job: Optional[Allocation], states: Mapping[str, Node]) -> list[HostOutcome]:
    """Outcomes of every host, in order: the nodes Slurm says cannot run a step are
    findings with its reason; the rest are probed in one step per interpreter (job is None
    only when no node can run one)."""
    done: dict[str, HostOutcome] = {}
    runnable: dict[tuple[str, str, Optional[ContainerSpec]], list[Host]] = {}
    for h in hosts:
        node = states.get(h.name)
        why = "Slurm does not know this node" if node is None else node.usable
        if why:
            done[h.name] = HostOutcome(h, failure=HostFailure(Stage.SLURM, why))
        else:
            # One step runs one command line: hosts that differ in it get steps of their own.
            runnable.setdefault((h.probe_python, h.python, h.container), []).append(h)
    for group in runnable.values():
        assert job is not None, "a node that can run a step, and no job to run it in"
        for o in probe_step(group, job, opts, call):
            done[o.host.name] = o
        # A step that cannot start on one node (its slurmd gone) is ended on all of them:
        # the others get a step of their own, so only the node at fault is its finding.
        again = [h for h in group if not done[h.name].ok] if len(group) > 1 else []
        if again:
            def alone(h: Host) -> None:
                done[h.name] = probe_step([h], job, opts, call)[0]
            in_parallel([functools.partial(alone, h) for h in again],
                        opts.deadline + IMMEDIATE_S + 5, "srun-probe")
    return [done[h.name] for h in hosts]


class SlurmRemote:
    """Commands on one node as steps of the job (a Remote, as SshRemote is over SSH)."""

    def __init__(self, name: str, job: Allocation) -> None:
        self.name, self.job = name, job

    def _argv(self, command: str) -> str:
        # exec: the TERM that closing the step sends reaches srun, which ends the step's
        # tasks on the node (dash would otherwise take it and leave srun and them running).
        return "exec " + shlex.join(self.job.srun([self.name], "sh", "-c", command))

    def start(self, command: str) -> Started:
        return LocalProcess(self._argv(command))

    def run(self, command: str, timeout: float) -> Done:
        proc = LocalProcess(self._argv(command))
        try:
            return proc.wait(timeout)
        finally:
            proc.close()
