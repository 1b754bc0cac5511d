"""Slurm: the probe and the active tests as job steps through srun (steps.py), in the user's
allocation or one asked for and given back; a plan as one batch job (batch.py). A node that
preflight drained is re-checked over SSH (SshTransport), since Slurm runs no step there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar, Optional

from preflight.common.hostjob import CollectOptions, OnResult, ProbeCall
from preflight.common.remote import Remote
from preflight.config.errors import UsageError
from preflight.model.host import Host, HostFailure, HostOutcome, Stage, Via
from preflight.model.report import ReachNotes
from preflight.model.watch import SCHEDULER_RUNNING, SchedulerEnd
from preflight.transport.base import BatchJob, Submitted
from preflight.transport.slurm import batch as batch_job
from preflight.transport.slurm import steps as slurm
from preflight.transport.ssh.transport import SshTransport


class SlurmTransport:
    via: ClassVar[Via] = Via.SLURM
    alone: ClassVar[bool] = False
    batch: ClassVar[bool] = True
    default_format: ClassVar[Optional[str]] = "slurm"  # $SLURM_JOB_NODELIST

    def __init__(self) -> None:
        self.job: Optional[slurm.Allocation] = None
        self.over_ssh = SshTransport()  # the nodes preflight drained
        self.rechecked: dict[str, str] = {}  # {node: its drain reason}
        self.answered: list[str] = []

    def collect(self, hosts: Sequence[Host], opts: CollectOptions, call: ProbeCall,
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
            done = {o.host.name: o for o in slurm.collect(through_slurm, opts, call,
                                                          self.job, states)}
        over_ssh = [replace(h, target=h.ssh) for h in hosts if h.name in self.rechecked]
        for o in self.over_ssh.collect(over_ssh, opts, call) if over_ssh else ():
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

    def submit(self, job: BatchJob) -> Submitted:
        """The plan as one Slurm batch job (sbatch --wait); see batch.py."""
        return batch_job.submit(job)

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
