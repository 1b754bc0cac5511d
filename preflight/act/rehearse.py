"""--act rehearsed on a watch's log (`preflight watch --replay`, the corpus's score): the real
Actor deciding on each judgement's findings as the watch would have, on the log's clock, its
steps said as what would be done; nothing is drained, stopped, checked or launched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from preflight.act import launches
from preflight.act.recover import ActOptions, Actor
from preflight.model.findings import Finding
from preflight.model.watch import ACT_AFTER_S, ActAt, ActStep, WatchPolicy


@dataclass(frozen=True)
class Acting:
    """--act's settings for a rehearsal: its cap, its cooldown, how long it confirms."""

    max_acts: int = 1
    cooldown_s: float = 600.0
    act_after_s: float = ACT_AFTER_S


def rehearsal(acting: Acting) -> Callable[[Mapping[str, Any], WatchPolicy], ActAt]:
    """For a log's start record and policy: what --act would do at each judgement."""

    def made(start: Mapping[str, Any], policy: WatchPolicy) -> ActAt:
        hosts = tuple(str(h) for h in start.get("hosts") or ())
        launched = launches.Launched(str(start.get("marker") or ""),
                                     str(start.get("plan") or ""), hosts,
                                     float(start.get("at") or 0.0))
        steps: list[ActStep] = []
        clock = [0.0]
        # As `watch --act` confirms: once a host is named without a break for --act-after.
        actor = Actor(ActOptions(launched.plan, launched, acting.max_acts, acting.cooldown_s,
                                 act_after_s=acting.act_after_s),
                      {}, lambda step, text, fields: steps.append(
                          ActStep(step, text, dict(fields))),
                      clock=lambda: clock[0], rehearse=True)

        def act(at: float, findings: Sequence[Finding]) -> Sequence[ActStep]:
            clock[0] = at
            steps.clear()
            actor(findings)
            return tuple(steps)

        return act

    return made
