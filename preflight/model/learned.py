"""What one run learned, live or read back from its results log: what judging takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from preflight.model.baseline import Audit
from preflight.model.host import HostOutcome
from preflight.model.measure import NetworkTests
from preflight.model.report import ReachNotes


@dataclass(frozen=True)
class Learned:
    """Every host's outcome, the active tests as far as they got, and the run's own facts."""

    command: str  # check, audit or baseline
    outcomes: tuple[HostOutcome, ...]
    network: Optional[NetworkTests]
    started_at: float  # epoch seconds
    duration_s: Optional[float]  # None: a run that stopped before its end
    interrupted: bool
    audit: Optional[Audit] = None  # the baseline an audit compared with
    ips: Optional[Mapping[str, str]] = None  # as the run resolved them; None: resolve now
    notes: ReachNotes = field(default_factory=ReachNotes)  # the transport's
    argv: tuple[str, ...] = ()  # the run's command line, after the program's name
    cwd: Optional[str] = None  # the directory it ran in
