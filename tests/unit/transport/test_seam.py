"""A transport is one module: the run drives any class of the protocol put in the table,
and knows nothing of it beyond the protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Optional

from support import host_facts

from preflight import pipeline
from preflight.collect.fanout import CollectOptions
from preflight.common.remote import Remote
from preflight.model.host import Host, HostOutcome, SlurmNode, Via
from preflight.model.plan import Node, Plan
from preflight.model.report import ReachNotes
from preflight.pipeline import CheckOptions
from preflight.transport import table
from preflight.transport.base import HostQuery, OnResult


class Pigeons:
    """A transport of its own: hosts from the query's hostlist, facts from the builders."""

    via: ClassVar[Via] = Via.SLURM  # stands in for one in the table
    alone: ClassVar[bool] = False
    default_format: ClassVar[Optional[str]] = None
    made: ClassVar[list[Pigeons]] = []

    def __init__(self) -> None:
        self.closed = False
        self.collected: list[str] = []
        Pigeons.made.append(self)

    def hosts(self, query: HostQuery) -> list[Host]:
        return [Host(n, f"10.9.0.{i}", target=SlurmNode())
                for i, n in enumerate(str(query.inventory).split(","), 1)]

    def collect(self, hosts: Sequence[Host], opts: CollectOptions,
                on_result: Optional[OnResult] = None) -> list[HostOutcome]:
        self.collected = [h.name for h in hosts]
        outcomes = [HostOutcome(h, facts=host_facts()) for h in hosts]
        for i, o in enumerate(outcomes, 1):
            if on_result is not None:
                on_result(o, i, len(outcomes))
        return outcomes

    def remotes(self) -> dict[str, Remote]:
        return {}

    def notes(self) -> ReachNotes:
        return ReachNotes(rechecked_over_ssh={"p2": "a pigeon went by road"})

    def launch(self, nodes: Sequence[Node], source: Any, query: HostQuery, opts: Any) -> int:
        return 0

    def emit(self, plan: Plan, directory: str) -> str:
        return ""

    def close(self) -> None:
        self.closed = True


def test_a_run_goes_through_the_transport_of_the_table_and_closes_it(monkeypatch):
    monkeypatch.setitem(table.TRANSPORTS, Via.SLURM, Pigeons)
    Pigeons.made.clear()
    opts = CheckOptions(inventory="p1,p2", transport=Via.SLURM, network=None,
                        write_log=False, progress=False)
    run = pipeline.run(opts, "check")
    [used] = Pigeons.made
    assert used.collected == ["p1", "p2"] and used.closed
    # What the transport notes, in the report.
    assert run.report.rechecked_over_ssh == {"p2": "a pigeon went by road"}
    assert {n: h.via for n, h in run.report.hosts.items()} == {"p1": Via.SLURM,
                                                               "p2": Via.SLURM}
    assert all(h.ssh is None for h in run.report.hosts.values())  # SSH reached neither
    assert run.judgement.verdict.value == "go"
