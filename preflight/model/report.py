"""A report as read back (preflight report, diff, audit --baseline, launch --plan, drain):
the JSON document's own shape as frozen types, decoded once by config.typed. Every field
but a few has a default, so a report of an earlier release reads; what a renderer shows is
here, not in a dict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, Union

from preflight.model.baseline import Profile
from preflight.model.container import ContainerSpec
from preflight.model.facts import HostFacts
from preflight.model.findings import FailOn, Finding, Verdict
from preflight.model.host import Via
from preflight.model.measure import (
    Backend,
    FanIn,
    NicCounters,
    Phase,
    PortReach,
    PsRound,
    RunOutcome,
    Schedule,
)
from preflight.model.plan import CostOf
from preflight.model.policy import JobShape, Mode


@dataclass(frozen=True)
class SshSummary:
    """How SSH reached a host (never key paths: a report is shared)."""

    user: Optional[str] = None
    port: Optional[int] = None
    via: tuple[str, ...] = ()  # jump hosts, user@address:port, first hop first


@dataclass(frozen=True)
class FailureEntry:
    stage: Optional[str] = None
    reason: Optional[str] = None


@dataclass(frozen=True)
class HostEntry:
    address: Optional[str] = None
    via: Optional[Via] = None  # absent from reports before the transports
    ssh: Optional[SshSummary] = None
    status: Optional[str] = None  # "ok" or "failed"
    failure: Optional[FailureEntry] = None
    elapsed_s: Optional[float] = None
    facts: Optional[HostFacts] = None

    @property
    def ok(self) -> bool:
        """Whether the host was probed (its facts are here)."""
        return self.status == "ok"


@dataclass(frozen=True)
class LinkEntry:
    sender: str
    receiver: str
    phase: Optional[Phase] = None
    received_bps: Optional[float] = None
    sent_bps: Optional[float] = None
    retransmits: Optional[int] = None
    loss_pct: Optional[float] = None
    seconds: Optional[float] = None
    streams: Optional[int] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class SizeEntry:
    bytes: int
    seconds: float
    algbw_bytes_s: float
    busbw_bytes_s: float


@dataclass(frozen=True)
class AllReduceEntry:
    backend: Optional[Backend] = None
    hosts: tuple[str, ...] = ()
    ranks: Optional[int] = None
    error: Optional[str] = None
    failed: Mapping[str, str] = field(default_factory=dict)
    log_hints: Mapping[str, Optional[str]] = field(default_factory=dict)
    wall_s: Optional[float] = None
    budget_s: Optional[float] = None
    predicted_s: Optional[float] = None
    iters: Optional[int] = None
    dropped: tuple[str, ...] = ()
    outcome: Optional[RunOutcome] = None
    launch_s: Optional[float] = None
    progress: Mapping[str, str] = field(default_factory=dict)
    cut: Optional[str] = None
    expected: Optional[str] = None
    sizes: tuple[SizeEntry, ...] = ()


@dataclass(frozen=True)
class NetworkEntry:
    schedule: Optional[Schedule] = None
    hosts: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    interrupted: Optional[bool] = None
    wall_s: Optional[float] = None
    rounds: Optional[int] = None
    links: tuple[LinkEntry, ...] = ()
    nic_mbps: Mapping[str, Optional[float]] = field(default_factory=dict)
    nic_counters: Mapping[str, NicCounters] = field(default_factory=dict)
    allreduce: Optional[AllReduceEntry] = None
    allreduce_skipped: Optional[str] = None
    allreduce_left_out: Mapping[str, str] = field(default_factory=dict)
    fanin: tuple[FanIn, ...] = ()  # PS jobs: each server host receiving from its trainers
    reach: tuple[PortReach, ...] = ()  # each plan host's ports from the plan's other hosts
    ps: Optional[PsRound] = None  # PS jobs: the round on the plan
    ps_skipped: Optional[str] = None


@dataclass(frozen=True)
class EndpointEntry:
    host: str
    endpoint: str


@dataclass(frozen=True)
class CostEntry:
    bytes: int
    with_s: float
    without_s: float
    factor: Optional[float] = None
    basis: Optional[str] = None
    what: Optional[CostOf] = None  # None: an all-reduce (reports before PS costs)
    double_at: Optional[int] = None  # ps-step: bytes a step at which it would cost 2x


@dataclass(frozen=True)
class NodeEntry:
    host: str
    address: Optional[str] = None
    rank: Optional[int] = None
    nproc: Optional[int] = None
    python: Optional[str] = None
    ports: tuple[int, ...] = ()
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    command: Optional[str] = None
    container: Optional[ContainerSpec] = None  # the job's container; None: on the host


@dataclass(frozen=True)
class PlanEntry:
    mode: Optional[Mode] = None
    fits: Optional[bool] = None
    lacks: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    requested: Optional[JobShape] = None
    nproc_per_node: Optional[int] = None
    master: Optional[str] = None
    servers: tuple[EndpointEntry, ...] = ()
    workers: tuple[EndpointEntry, ...] = ()
    excluded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    costs: Mapping[str, CostEntry] = field(default_factory=dict)
    nodes: tuple[NodeEntry, ...] = ()


@dataclass(frozen=True)
class AuditEntry:
    baseline: Optional[str] = None
    taken_at: Optional[float] = None
    taken_on: Optional[str] = None
    tolerance: Optional[float] = None
    max_age_s: Optional[float] = None


@dataclass(frozen=True)
class ReachNotes:
    """What a transport records of how it reached the hosts."""

    # Hosts reached over SSH instead of the transport's own way, and why (a Slurm node
    # that preflight drained runs no job step: it is re-checked over SSH).
    rechecked_over_ssh: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AllReduceRefEntry:
    """A baseline's all-reduce figure: busbw at its largest message size."""

    backend: str
    ranks: int
    bytes: int
    busbw_bytes_s: float


@dataclass(frozen=True)
class BaselineSection:
    """A baseline file's own section: every host's profile, the reference profile (each
    field's majority), the reference figures, and who took it when."""

    baseline_version: int
    taken_at: float
    profiles: Mapping[str, Profile]
    reference: Profile = field(default_factory=Profile)
    taken_on: Optional[str] = None
    taken_by: Optional[str] = None
    inventory: Optional[str] = None
    hosts: tuple[str, ...] = ()
    link_bps: Optional[float] = None
    allreduce: Optional[AllReduceRefEntry] = None


@dataclass(frozen=True)
class Report:
    report_version: int = 1
    verdict: Optional[Verdict] = None
    reasons: tuple[str, ...] = ()
    waived: tuple[str, ...] = ()
    # Checks that had nothing to judge in this run: {check: when it applies}.
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    command: Optional[str] = None
    # The check's command line after `preflight` (`watch --act` checks again with it).
    argv: tuple[str, ...] = ()
    cwd: Optional[str] = None  # the directory the check ran in: argv's relative paths
    local: Optional[bool] = None
    started_at: Optional[float] = None
    duration_s: Optional[float] = None
    inventory: Optional[str] = None
    inventory_format: Optional[str] = None
    ssh_config: Optional[str] = None
    limit: Union[str, tuple[str, ...], None] = None
    interrupted: Optional[bool] = None
    fail_on: Optional[FailOn] = None
    rechecked_over_ssh: Mapping[str, str] = field(default_factory=dict)
    audit: Optional[AuditEntry] = None
    hosts: Mapping[str, HostEntry] = field(default_factory=dict)
    network: Optional[NetworkEntry] = None
    plan: Optional[PlanEntry] = None
    findings: tuple[Finding, ...] = ()
    baseline: Optional[BaselineSection] = None  # a baseline file's (history.baseline)
