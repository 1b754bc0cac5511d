"""The report of a run, built once from the types the run produced: hosts, measurements,
plan and findings become the typed Report (model/report.py) that every renderer takes and
jsonreport writes. A saved report reads back into the same types."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Optional

from preflight.common.containercmd import node_command
from preflight.common.plain import jsonable
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Judgement
from preflight.model.host import HostOutcome
from preflight.model.measure import AllReduce, LinkRun, NetworkTests
from preflight.model.plan import Node, Plan
from preflight.model.report import (
    AllReduceEntry,
    CostEntry,
    EndpointEntry,
    FailureEntry,
    HostEntry,
    LinkEntry,
    NetworkEntry,
    NodeEntry,
    PlanEntry,
    Report,
    SizeEntry,
    SshSummary,
)


def report(cluster: Cluster, judgement: Judgement, plan: Optional[Plan]) -> Report:
    """The report of a judged cluster: its verdict, hosts, measurements, plan (None: a
    machine audited alone has none) and findings. What a run adds of itself (its command,
    options, times) the caller sets with dataclasses.replace."""
    return Report(
        verdict=judgement.verdict, reasons=tuple(judgement.reasons),
        waived=tuple(judgement.waived), not_applicable=dict(judgement.not_applicable),
        hosts={o.host.name: host_entry(o) for o in cluster.outcomes},
        network=network_entry(cluster.network), plan=plan_entry(plan),
        findings=tuple(_plain(f) for f in judgement.findings))


def host_entry(o: HostOutcome) -> HostEntry:
    t = o.host.reached_over_ssh
    return HostEntry(
        address=o.host.address, via=o.host.via,
        # How SSH reached it (no key paths: a report is shared; the log has them).
        ssh=None if t is None else SshSummary(
            t.user, t.port, tuple(f"{j.ssh.user}@{j.address}:{j.ssh.port}" for j in t.jump)),
        status="ok" if o.ok else "failed",
        failure=None if o.failure is None else FailureEntry(o.failure.stage.value,
                                                            o.failure.reason),
        elapsed_s=round(o.elapsed_s, 3), facts=o.facts)


def _plain(f: Finding) -> Finding:
    """A finding as a report keeps it: its data as plain JSON values, as read back."""
    return replace(f, hosts=tuple(f.hosts), data=jsonable(dict(f.data)))


def network_entry(net: Optional[NetworkTests]) -> Optional[NetworkEntry]:
    """The active tests' measurements (None when they were not run)."""
    if net is None:
        return None
    return NetworkEntry(
        schedule=net.schedule, hosts=tuple(net.hosts), skipped=dict(net.skipped),
        interrupted=net.interrupted, wall_s=round(net.wall_s, 3), rounds=net.rounds,
        links=tuple(_link(r) for r in net.links), nic_mbps=dict(net.nic_mbps),
        nic_counters=dict(net.nic_counters), allreduce=_allreduce(net.allreduce),
        allreduce_skipped=net.allreduce_skipped,
        allreduce_left_out=dict(net.allreduce_left_out), fanin=tuple(net.fanin), ps=net.ps,
        ps_skipped=net.ps_skipped, reach=tuple(net.reach))


def _link(r: LinkRun) -> LinkEntry:
    x = r.result
    return LinkEntry(r.sender, r.receiver, r.phase, x.received_bps, x.sent_bps,
                     x.retransmits, x.loss_pct, x.seconds, x.streams, x.error)


def _rounded(v: Optional[float]) -> Optional[float]:
    return None if v is None else round(v, 3)


def _allreduce(ar: Optional[AllReduce]) -> Optional[AllReduceEntry]:
    if ar is None:
        return None
    return AllReduceEntry(
        backend=ar.backend, hosts=tuple(ar.hosts), ranks=ar.ranks, error=ar.error,
        failed=dict(ar.failed), log_hints=dict(ar.logs), wall_s=round(ar.wall_s, 3),
        budget_s=ar.budget_s, predicted_s=_rounded(ar.predicted_s), iters=ar.iters,
        dropped=tuple(ar.dropped), outcome=ar.outcome, launch_s=_rounded(ar.launch_s),
        progress=dict(ar.progress), cut=ar.cut, expected=ar.expected,
        sizes=tuple(SizeEntry(s.nbytes, s.seconds, s.algbw, s.busbw) for s in ar.sizes))


def plan_entry(plan: Optional[Plan]) -> Optional[PlanEntry]:
    """The placement plan: who runs what where, who was left out, the commands."""
    if plan is None:
        return None
    return PlanEntry(
        mode=plan.mode, fits=plan.fits, lacks=tuple(plan.lacks), notes=tuple(plan.notes),
        requested=plan.shape, nproc_per_node=plan.nproc_per_node, master=plan.master,
        servers=tuple(EndpointEntry(e.host, str(e)) for e in plan.servers),
        workers=tuple(EndpointEntry(e.host, str(e)) for e in plan.workers),
        excluded={h: tuple(r) for h, r in plan.excluded.items()},
        costs={h: CostEntry(c.nbytes, round(c.with_s, 3), round(c.without_s, 3),
                            round(c.factor, 2), c.basis, c.what,
                            None if c.double_at is None else round(c.double_at))
               for h, c in plan.costs.items()},
        nodes=tuple(_node(n) for n in plan.nodes))


def _node(n: Node) -> NodeEntry:
    return NodeEntry(n.host, n.address, n.rank, n.nproc, n.python, tuple(n.ports),
                     tuple(n.argv), _env(n.env), node_command(n), n.container)


def _env(pairs: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    return dict(pairs)
