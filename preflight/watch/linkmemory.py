"""What the link rule (rules/links.py) carries on a job from one judgement to the next; replay
judges at the same beat as the watch did, so it carries the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

Pair = tuple[str, str]  # (sender, receiver) hosts


@dataclass
class LinkMemory:
    # The host named as the one in every full send queue, and since when (the controller's
    # clock): it stays the cause while it is an end of every full pair (which of its pairs
    # are full changes from window to window).
    host: Optional[str] = None
    since: float = 0.0
    # The pair(s) last said as the link between two ends, and when: said on while they hold,
    # not held back each time a pair beside them fills.
    pair: frozenset[Pair] = frozenset()
    pair_at: float = 0.0
    # What the send queues of its pairs of hosts were like while it kept its early pace: the
    # judgements counted, and each pair's share of full samples summed over them (a queue full
    # from the start is no news once the pace falls).
    paced_judgements: int = 0
    paced_full: dict[Pair, float] = field(default_factory=dict)
