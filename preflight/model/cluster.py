"""The one input of every check: what collection and measurement learned, and what the job
needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from preflight.model.baseline import Audit
from preflight.model.facts import HostFacts
from preflight.model.host import HostOutcome
from preflight.model.measure import NetworkTests
from preflight.model.policy import Policy


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
