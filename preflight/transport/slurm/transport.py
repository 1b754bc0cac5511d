"""Slurm: the probe and the active tests as job steps through srun (collect/slurm.py), in the
user's allocation or one asked for and given back; the plan as one batch job. A node that
preflight drained is re-checked over SSH (SshTransport), since Slurm runs no step there."""

from __future__ import annotations

import math
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar, Optional

from preflight.act import launches
from preflight.act.launch import EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, MARKER, LaunchOptions, Source
from preflight.collect.fanout import CollectOptions
from preflight.common.remote import Remote
from preflight.config.errors import UsageError
from preflight.model.host import Host, HostFailure, HostOutcome, SlurmNode, Stage, Via
from preflight.model.plan import Node, Plan
from preflight.model.report import ReachNotes
from preflight.model.watch import SCHEDULER_RUNNING, SchedulerEnd
from preflight.placement import launcher, sbatch
from preflight.transport.base import HostQuery, OnResult, inventory_hosts
from preflight.transport.slurm import steps as slurm
from preflight.transport.ssh.transport import SshTransport

SBATCH_GRACE_S = 120  # past --time, what sbatch --wait gets to report the job's end
JOB_POLL_MAX_S = 15.0  # squeue is asked at most this far apart while the job waits to run


class SlurmTransport:
    via: ClassVar[Via] = Via.SLURM
    alone: ClassVar[bool] = False
    default_format: ClassVar[Optional[str]] = "slurm"  # $SLURM_JOB_NODELIST

    def __init__(self) -> None:
        self.job: Optional[slurm.Allocation] = None
        self.over_ssh = SshTransport()  # the nodes preflight drained
        self.rechecked: dict[str, str] = {}  # {node: its drain reason}
        self.answered: list[str] = []

    def hosts(self, query: HostQuery) -> list[Host]:
        return [replace(h, target=SlurmNode(h.ssh)) for h in inventory_hosts(query)]

    def collect(self, hosts: Sequence[Host], opts: CollectOptions,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        """The hosts' outcomes through Slurm, in the job their steps ran in (the user's
        allocation, else one asked for the nodes that can run a step).

        A node Slurm will not run a step on is a finding with Slurm's reason, except one that
        preflight drained: Slurm runs no step there, so the fix would never be seen and
        `resume` could never return it. Such a node is re-checked over SSH, as the operator
        who drains and resumes nodes reaches it (pam_slurm_adopt lets administrators in), and
        it stays drained throughout: no job can land on it before it has passed."""
        try:
            states = slurm.nodes([h.name for h in hosts])
        except slurm.SlurmError as e:
            raise UsageError(f"--transport slurm: {e}") from None
        # Peers reach a node at its NodeAddr (no SSH_CONNECTION tells it here).
        hosts = [replace(h, address=states[h.name].address) if h.name in states else h
                 for h in hosts]
        self.rechecked = {h.name: states[h.name].reason for h in hosts
                          if h.name in states and states[h.name].drained_by_preflight}
        through_slurm = [h for h in hosts if h.name not in self.rechecked]
        usable = [h.name for h in through_slurm
                  if h.name in states and not states[h.name].usable]
        done: dict[str, HostOutcome] = {}
        self.job = slurm.Allocation.current()
        if self.job is None and usable:
            try:
                self.job = slurm.Allocation.request(usable, opts.connect_timeout)
            except slurm.SlurmError as e:
                done = {h.name: HostOutcome(h, failure=HostFailure(Stage.SLURM, str(e)))
                        for h in through_slurm}
        if through_slurm and not done:
            done = {o.host.name: o for o in slurm.collect(through_slurm, opts, self.job,
                                                          states)}
        over_ssh = [replace(h, target=h.ssh) for h in hosts if h.name in self.rechecked]
        for o in self.over_ssh.collect(over_ssh, opts) if over_ssh else ():
            done[o.host.name] = o if o.ok or o.failure is None else HostOutcome(
                o.host, failure=HostFailure(Stage.SLURM, (
                    f"node drained ({self.rechecked[o.host.name]}); its re-check over SSH "
                    f"failed ({o.failure.stage.value}): {o.failure.reason}")),
                elapsed_s=o.elapsed_s)
        outcomes = [done[h.name] for h in hosts]
        for i, o in enumerate(outcomes, 1):
            if on_result is not None:
                on_result(o, i, len(outcomes))
        self.answered = [o.host.name for o in outcomes
                         if o.ok and o.host.name not in self.rechecked]
        return outcomes

    def remotes(self) -> dict[str, Remote]:
        """Job steps for the nodes that answered through Slurm; the nodes re-checked over
        SSH take part in the active tests over SSH."""
        out: dict[str, Remote] = {}
        if self.job is not None:
            out = {name: slurm.SlurmRemote(name, self.job) for name in self.answered}
        out.update(self.over_ssh.remotes())
        return out

    def notes(self) -> ReachNotes:
        return ReachNotes(rechecked_over_ssh=dict(self.rechecked))

    def launch(self, nodes: Sequence[Node], source: Source, query: HostQuery,
               opts: LaunchOptions) -> int:
        """Runs the plan as one Slurm batch job (sbatch --wait) and returns its exit code;
        the batch script goes to Slurm from a temporary file here, nothing needs sharing but
        the training script. The job's output is Slurm's (slurm-JOBID.out in its directory).
        Its processes carry the launch marker (sbatch --export) and the launch is recorded
        with its job id once the job runs, so `preflight watch --plan` follows it (and --act
        stops it by its marker and submits the plan that replaces it)."""
        text = sbatch.batch_script(nodes, source.mode)
        token = secrets.token_hex(8)
        with tempfile.NamedTemporaryFile("w", prefix="preflight-", suffix=".sbatch",
                                         delete=False) as fh:
            fh.write(text)
        argv = ["sbatch", "--wait", "--parsable", f"--job-name=preflight-{token}",
                f"--export=ALL,{MARKER}={token}"]
        if opts.chdir:
            argv.append(f"--chdir={opts.chdir}")
        if opts.timeout:
            argv.append(f"--time={max(1, math.ceil(opts.timeout / 60))}")
        limit = None if opts.timeout is None else opts.timeout + SBATCH_GRACE_S
        try:
            p = subprocess.Popen([*argv, fh.name, *opts.script], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        except FileNotFoundError:
            os.unlink(fh.name)
            print("preflight launch: sbatch not found (is this a Slurm login node?)",
                  file=sys.stderr)
            return EXIT_FAILED
        try:
            if opts.plan:
                self._record(p, token, nodes, opts)
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            print("preflight launch: the job did not end within its time limit",
                  file=sys.stderr)
            return EXIT_TIMEOUT
        finally:
            os.unlink(fh.name)
        job = out.strip().split(";")[0]
        where = opts.chdir or "the submit directory"
        print(f"preflight launch: Slurm job {job or '?'} on {','.join(n.host for n in nodes)} "
              f"ended with exit {p.returncode} (output: slurm-{job}.out in {where})"
              + (f": {err.strip().splitlines()[-1]}" if p.returncode and err.strip()
                 else ""), file=sys.stderr)
        return EXIT_OK if p.returncode == 0 else EXIT_FAILED

    @staticmethod
    def _record(p: subprocess.Popen[str], token: str, nodes: Sequence[Node],
                opts: LaunchOptions) -> threading.Thread:
        """Records the launch once its job runs, found by the unique name it was given
        (sbatch --wait's own output is read when it ends; a watch's samplers are steps in the
        job, which a pending job cannot run). Asks squeue less often the longer it waits."""
        assert opts.plan is not None
        plan = opts.plan

        def poll() -> None:
            pause = 1.0
            while p.poll() is None:
                try:
                    running = slurm.job_of_name(f"preflight-{token}", running=True)
                except slurm.SlurmError:
                    running = None
                if running:
                    launches.record(token, plan, [n.host for n in nodes], opts.script,
                                    opts.chdir, opts.timeout, "slurm", running)
                    print(f"preflight launch: Slurm job {running} runs, marker {MARKER}="
                          f"{token} (preflight watch --plan {shlex.quote(plan)} --transport "
                          "slurm follows it)", file=sys.stderr, flush=True)
                    return
                time.sleep(pause)
                pause = min(pause * 1.5, JOB_POLL_MAX_S)

        t = threading.Thread(target=poll, name="job-listed", daemon=True)
        t.start()
        return t

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        """Steps in the job already running there (self.job, set by whoever knows it, else
        the allocation this runs in): srun --overlap shares its nodes without queueing."""
        self.job = self.job or slurm.Allocation.current()
        if self.job is None:
            raise UsageError("--transport slurm: no job to run steps in (give its id, or "
                             "run inside its allocation)")
        self.answered = [h.name for h in hosts]
        return {}

    def emit(self, plan: Plan, directory: str) -> str:
        launcher.emit(plan, directory, batch=True)
        return (f"launch scripts: {len(plan.nodes)} hosts in {directory} (and {sbatch.NAME}: "
                "sbatch it with the training script)")

    def follow(self, jobid: str) -> None:
        self.job = slurm.Allocation(jobid)

    def job_end(self) -> Optional[SchedulerEnd]:
        if self.job is None or self.job.own:
            return None
        try:
            state, reason = slurm.job_state(self.job.job_id)
        except slurm.SlurmError:
            return None  # Slurm not answering is no end: the samplers say the rest
        return None if state in SCHEDULER_RUNNING else \
            SchedulerEnd(self.job.job_id, state, reason)

    def close(self) -> None:
        self.over_ssh.close()
        if self.job is not None:
            self.job.close()
            self.job = None
