"""This machine alone (check with no inventory): the probe as a local subprocess, no SSH, no
peers and so no plan to launch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Optional

from preflight.common.hostjob import CollectOptions, OnResult, ProbeCall, fan_out
from preflight.common.remote import Remote
from preflight.model.host import Host, HostOutcome, Via
from preflight.model.report import ReachNotes
from preflight.model.watch import SchedulerEnd
from preflight.transport.base import BatchJob, Submitted, no_batch
from preflight.transport.local.run import LocalJob, LocalRemote


class LocalTransport:
    via: ClassVar[Via] = Via.LOCAL
    alone: ClassVar[bool] = True
    batch: ClassVar[bool] = False
    default_format: ClassVar[Optional[str]] = None

    def __init__(self) -> None:
        self.answered: list[str] = []

    def collect(self, hosts: Sequence[Host], opts: CollectOptions, call: ProbeCall,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        outcomes = fan_out(hosts, opts, LocalJob, call, on_result=on_result)
        self.answered = [o.host.name for o in outcomes if o.ok]
        return outcomes

    def remotes(self) -> dict[str, Remote]:
        return {name: LocalRemote(name) for name in self.answered}

    def notes(self) -> ReachNotes:
        return ReachNotes()

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        self.answered = [h.name for h in hosts]
        return {}

    def submit(self, job: BatchJob) -> Submitted:
        return no_batch(self.via)

    def follow(self, jobid: str) -> None:
        pass  # no scheduler: the commands run on the hosts as they are

    def job_end(self) -> Optional[SchedulerEnd]:
        return None

    def close(self) -> None:
        pass
