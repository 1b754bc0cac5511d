"""The typed data that flows through preflight: hosts, outcomes, findings, verdict."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from preflight.baseline import Audit
from preflight.facts import HostFacts
from preflight.measure import NetworkTests
from preflight.policy import Policy


@dataclass(frozen=True)
class Host:
    """One inventory entry, every default already applied."""

    name: str
    address: str
    user: str = "root"
    port: int = 22
    identity_file: Optional[str] = None
    known_hosts: Optional[str] = None
    python: str = "python3"
    probe_python: str = "python3"
    local: bool = False  # audit of this machine: no SSH at all
    roles: tuple[str, ...] = ("worker", "server")  # what the plan may make of it


class Stage(str, enum.Enum):
    """Where a host's collection stopped; the order is the order of a run."""

    CONNECT = "connect"
    HOST_KEY = "host-key"
    AUTH = "auth"
    UPLOAD = "upload"
    PROBE = "probe"
    PARSE = "parse"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C, SIGTERM) before this host answered


@dataclass(frozen=True)
class HostFailure:
    """Why a host could not be checked, and at which stage."""

    stage: Stage
    reason: str


@dataclass(frozen=True)
class HostOutcome:
    """What collection learned of one host: its facts, or why there are none."""

    host: Host
    facts: Optional[HostFacts] = None
    failure: Optional[HostFailure] = None
    elapsed_s: float = 0.0
    received_at: float = 0.0  # controller's epoch time when the probe output arrived
    # What the probe printed, as parsed into facts: the results log keeps it.
    probe_output: str = field(default="", repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.facts is not None


class Status(str, enum.Enum):
    """A finding's status, from best to worst for the verdict."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    COULD_NOT_CHECK = "could-not-check"
    ERROR = "error"  # the check itself crashed: a bug in preflight, never a pass


@dataclass(frozen=True)
class Finding:
    """One judgement of one check about one or more hosts."""

    check: str
    status: Status
    hosts: tuple[str, ...]
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)


class Verdict(str, enum.Enum):
    GO = "go"
    NO_GO = "no-go"


@dataclass(frozen=True)
class Judgement:
    """The verdict with the findings that decided it."""

    verdict: Verdict
    findings: tuple[Finding, ...]
    reasons: tuple[str, ...]

    @property
    def crashed_checks(self) -> bool:
        return any(f.status is Status.ERROR for f in self.findings)


@dataclass(frozen=True)
class Cluster:
    """Everything collection learned about every host, and what the job needs: the one input
    of every check."""

    outcomes: tuple[HostOutcome, ...]
    policy: Policy = field(default_factory=Policy)
    network: Optional[NetworkTests] = None  # None: the active tests were not run
    audit: Optional[Audit] = None  # a baseline to compare with (preflight audit)

    def probed(self) -> list[tuple[str, HostFacts]]:
        """Returns (host name, facts) for every host whose probe succeeded, in order."""
        return [(o.host.name, o.facts) for o in self.outcomes if o.facts is not None]
