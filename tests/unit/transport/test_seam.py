"""A transport is one module: the run drives any class of the protocol put in the table and
knows nothing of it beyond the protocol; the transport knows nothing of the stages (it runs
the probe it is handed, and a plan's batch script it is handed)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import ClassVar, Optional

import pytest
from support import host_facts

from preflight import launching, pipeline
from preflight.act import launches
from preflight.act.launch import EXIT_FAILED, EXIT_OK, MARKER, LaunchOptions, Source
from preflight.collect import fanout
from preflight.common.hostjob import CollectOptions, OnResult, ProbeCall
from preflight.common.remote import Remote
from preflight.config.errors import UsageError
from preflight.inventory.query import HostQuery, hosts_of
from preflight.model.host import Host, HostOutcome, Via
from preflight.model.plan import Node
from preflight.model.report import ReachNotes
from preflight.model.watch import SchedulerEnd
from preflight.pipeline import CheckOptions
from preflight.transport import table
from preflight.transport.base import BatchJob, Submitted, Transport
from preflight.transport.local.run import LocalRemote


class Pigeons:
    """A transport of its own: it carries what it is handed, and says what it carried."""

    via: ClassVar[Via] = Via.SLURM  # stands in for one in the table
    alone: ClassVar[bool] = False
    batch: ClassVar[bool] = False
    default_format: ClassVar[Optional[str]] = None
    made: ClassVar[list[Pigeons]] = []

    def __init__(self) -> None:
        self.closed = False
        self.collected: list[str] = []
        self.carried: list[str] = []  # the commands it was handed
        self.reached: list[str] = []
        self.submitted: list[BatchJob] = []
        Pigeons.made.append(self)

    def collect(self, hosts: Sequence[Host], opts: CollectOptions, call: ProbeCall,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        self.collected = [h.name for h in hosts]
        self.carried = [call.command(h, opts, 30.0) for h in hosts]
        outcomes = [HostOutcome(h, facts=host_facts()) for h in hosts]
        for i, o in enumerate(outcomes, 1):
            if on_result is not None:
                on_result(o, i, len(outcomes))
        return outcomes

    def remotes(self) -> dict[str, Remote]:
        return {name: LocalRemote(name) for name in self.reached}

    def notes(self) -> ReachNotes:
        return ReachNotes(rechecked_over_ssh={"p2": "a pigeon went by road"})

    def reach(self, hosts: Sequence[Host], connect_timeout: float,
              accept_new_host_keys: bool) -> dict[str, str]:
        self.reached = [h.name for h in hosts]
        return {}

    def submit(self, job: BatchJob) -> Submitted:
        self.submitted.append(job)
        if job.on_running is not None:
            job.on_running("77")
        return Submitted(0, "77", "", output="the loft")

    def follow(self, jobid: str) -> None:
        pass

    def job_end(self) -> Optional[SchedulerEnd]:
        return None

    def close(self) -> None:
        self.closed = True


class BatchPigeons(Pigeons):
    batch: ClassVar[bool] = True


def test_a_pigeon_is_a_transport():
    assert isinstance(Pigeons(), Transport)


def test_a_run_goes_through_the_transport_of_the_table_and_closes_it(monkeypatch):
    monkeypatch.setitem(table.TRANSPORTS, Via.SLURM, Pigeons)
    Pigeons.made.clear()
    # Hosts named by address: the plan places ranks at their addresses.
    opts = CheckOptions(inventory="10.9.0.1,10.9.0.2", transport=Via.SLURM, network=None,
                        write_log=False, progress=False)
    run = pipeline.run(opts, "check")
    [used] = Pigeons.made
    assert used.collected == ["10.9.0.1", "10.9.0.2"] and used.closed
    # It carried the collect stage's probe, each host's own command.
    hosts = hosts_of(HostQuery("10.9.0.1,10.9.0.2"), Via.SLURM, False)
    assert used.carried == [fanout.remote_command(h, opts.collect, 30.0) for h in hosts]
    # What the transport notes, in the report.
    assert run.report.rechecked_over_ssh == {"p2": "a pigeon went by road"}
    # The inventory's hosts, targeted for the transport that reaches them.
    assert {n: h.via for n, h in run.report.hosts.items()} == {"10.9.0.1": Via.SLURM,
                                                               "10.9.0.2": Via.SLURM}
    assert all(h.ssh is None for h in run.report.hosts.values())  # SSH reached neither
    assert run.judgement.verdict.value == "go"


def _node(host: str, body: str) -> Node:
    return Node(host, "127.0.0.1", "sh", 0, 1, (), ("sh", "-c", body, host), ())


def test_a_launch_reaches_the_plans_hosts_through_the_transport_and_runs_it_there():
    pigeons, out = Pigeons(), io.StringIO()
    nodes = [_node("p1", 'echo "p1 runs $1"'), _node("p2", 'echo "p2 runs $1"')]
    code = launching.launch(pigeons, nodes, Source("r.json"), HostQuery("p1,p2,p3"),
                            LaunchOptions(("train.py",)), out, io.StringIO())
    assert code == EXIT_OK
    assert pigeons.reached == ["p1", "p2"]  # the plan's hosts, not the inventory's third
    assert sorted(out.getvalue().splitlines()) == ["p1 | p1 runs train.py",
                                                   "p2 | p2 runs train.py"]


def test_a_launch_of_a_host_the_inventory_lacks_is_refused_in_one_line():
    with pytest.raises(UsageError, match=r"--plan r.json: host p9 is not in p1,p2"):
        launching.launch(Pigeons(), [_node("p9", "true")], Source("r.json"),
                         HostQuery("p1,p2"), LaunchOptions(("x",)))


def test_a_batch_transport_is_handed_the_plan_as_one_job_and_the_launch_recorded(
        tmp_path, monkeypatch):
    monkeypatch.setattr(launches, "directory", lambda: str(tmp_path))
    pigeons, err = BatchPigeons(), io.StringIO()
    nodes = [_node("p1", "true"), _node("p2", "true")]
    code = launching.launch(pigeons, nodes, Source("r.json"), HostQuery("p1,p2"),
                            LaunchOptions(("train.py", "--lr", "0.1"), chdir="/work",
                                          timeout=90, plan=str(tmp_path / "r.json")),
                            err=err)
    assert code == EXIT_OK and pigeons.reached == []  # no launcher started host by host
    [job] = pigeons.submitted
    assert job.args == ("train.py", "--lr", "0.1") and job.chdir == "/work"
    assert job.timeout == 90 and "#SBATCH" in job.text  # placement's batch script
    token = job.env[MARKER]
    assert job.name == f"preflight-{token}"
    rec = launches.by_token(token)
    assert rec is not None and rec.jobid == "77" and rec.hosts == ("p1", "p2")
    assert rec.transport == "slurm"  # the transport it ran through, for a relaunch
    assert "job 77 runs" in err.getvalue() and "ended with exit 0" in err.getvalue()


def test_a_batch_job_that_never_ran_fails_the_launch_with_the_schedulers_words():
    class Refused(BatchPigeons):
        def submit(self, job: BatchJob) -> Submitted:
            return Submitted(None, "", "sbatch not found (is this a Slurm login node?)")
    err = io.StringIO()
    code = launching.launch(Refused(), [_node("p1", "true")], Source("r.json"),
                            HostQuery("p1"), LaunchOptions(("x",)), err=err)
    assert code == EXIT_FAILED
    assert err.getvalue() == ("preflight launch: sbatch not found (is this a Slurm login "
                              "node?)\n")


def test_a_launch_through_a_transport_that_audits_this_machine_alone_is_refused():
    class Alone(Pigeons):
        alone: ClassVar[bool] = True
    with pytest.raises(UsageError, match="names no inventory"):
        launching.launch(Alone(), [_node("p1", "true")], Source("r.json"), HostQuery(),
                         LaunchOptions(("x",)))
