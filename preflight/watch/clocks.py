"""Each host's clock against the controller's, measured from its samples as they arrive: the
least delayed of its last OFFSET_TICKS (its time on the host less its time of receipt), all
along, so that first samples that came late, or a clock stepped by NTP, are outgrown. Events
on different hosts are ordered on the controller's clock (at()), never on the hosts' own
clocks raw: one host's clock set ahead would put its rank's death after the deaths it caused."""

from __future__ import annotations

from collections import deque

OFFSET_TICKS = 12  # about a minute of samples at the default interval


class HostClocks:
    def __init__(self) -> None:
        self.offset: dict[str, float] = {}  # host -> its clock less the controller's
        self._seen: dict[str, deque[float]] = {}

    def add(self, host: str, t: float, received: float) -> None:
        """A sample taken at t on the host's clock, received then on the controller's."""
        seen = self._seen.setdefault(host, deque(maxlen=OFFSET_TICKS))
        seen.append(t - received)
        self.offset[host] = max(seen)

    def at(self, host: str, t: float) -> float:
        """A time on host's clock, on the controller's."""
        return t - self.offset.get(host, 0.0)

    def lag(self, host: str, t: float, received: float) -> float:
        """How much later than the host's least delayed recent sample the one taken at t
        arrived: its age beyond the steady delay its offset holds (a connection that backs
        up, a clock stepped back)."""
        return max(0.0, received - self.at(host, t))
