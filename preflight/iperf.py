"""Parses `iperf3 -J` client output into a measurement (no judging here)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

MAX_OUTPUT = 4 << 20


@dataclass(frozen=True)
class IperfResult:
    """One iperf3 run from sender to receiver; error is set when there is no measurement."""

    sent_bps: Optional[float] = None
    received_bps: Optional[float] = None  # what arrived: the figure to judge a link by
    retransmits: Optional[int] = None
    seconds: Optional[float] = None
    sent_bytes: Optional[float] = None
    mss: Optional[int] = None  # TCP segment size: turns retransmits into a loss rate
    error: Optional[str] = None

    @property
    def loss_pct(self) -> Optional[float]:
        """Returns retransmitted segments as a percentage of the segments sent."""
        if self.retransmits is None or not self.sent_bytes or not self.mss:
            return None
        return 100.0 * self.retransmits * self.mss / self.sent_bytes


def _num(d: Any, key: str) -> Optional[float]:
    v = d.get(key) if isinstance(d, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_iperf3(text: str) -> IperfResult:
    """Returns the result of one client run. iperf3 reports failures inside its JSON
    ("error"), and was seen to exit 0 while doing so: the JSON decides, not the exit code."""
    if len(text) > MAX_OUTPUT:
        return IperfResult(error=f"iperf3 output of {len(text)} bytes is over the limit")
    try:
        doc = json.loads(text)
    except ValueError:
        first = text.strip().splitlines()[0][:120] if text.strip() else "no output"
        return IperfResult(error=f"iperf3 output is not JSON: {first!r}")
    if not isinstance(doc, dict):
        return IperfResult(error="iperf3 output is not a JSON object")
    if doc.get("error"):
        return IperfResult(error=str(doc["error"])[:300])
    end = doc.get("end")
    sent = end.get("sum_sent") if isinstance(end, dict) else None
    received = end.get("sum_received") if isinstance(end, dict) else None
    if not isinstance(sent, dict) or not isinstance(received, dict):
        return IperfResult(error="iperf3 output has no end.sum_sent / end.sum_received")
    retr = sent.get("retransmits")
    start = doc.get("start")
    mss = _num(start, "tcp_mss_default")
    return IperfResult(sent_bps=_num(sent, "bits_per_second"),
                       received_bps=_num(received, "bits_per_second"),
                       retransmits=retr if isinstance(retr, int) else None,
                       seconds=_num(received, "seconds"), sent_bytes=_num(sent, "bytes"),
                       mss=int(mss) if mss else None)
