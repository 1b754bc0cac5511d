"""A host to check, and what collecting its facts gave: the facts, or why there are none."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

from preflight.model.facts import HostFacts


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
