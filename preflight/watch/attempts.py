"""Which attempt of a job a rank belongs to: a job run again ends its earlier run (judged
apart, its clean ends no deaths), and a job whose launchers start its ranks again in place
(elastic) begins its next attempt (the ends before it leave the job). WatchState applies
these as samples arrive."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from preflight.model.watch import RankId


class JobSeries(Protocol):
    """What these read and change of a job (series.JobSeries, which uses them)."""

    ranks: dict[RankId, Any]
    gone: dict[RankId, tuple[float, tuple[str, ...]]]
    oom_killed: dict[RankId, tuple[int, int]]
    restarts: list[tuple[float, int]]

    @property
    def launchers(self) -> Mapping[tuple[str, int], Any]: ...


def restarted(job: JobSeries, rid: RankId, at: float) -> None:
    """A new rank that its launcher started with the number of one that ended (elastic, or a
    launcher's own retry) begins the job's next attempt: the ranks that ended before it leave
    the job (their ends were judged while they were the news), and the restart is kept (when,
    on the controller's clock, and how many had ended)."""
    if rid.rank is None or not any(
            g.host == rid.host and g.launcher == rid.launcher and g.role == rid.role
            and g.rank == rid.rank for g in job.gone):
        return
    ended = list(job.gone)
    for g in ended:
        del job.gone[g]
        job.ranks.pop(g, None)
        job.oom_killed.pop(g, None)
    job.restarts.append((at, len(ended)))


def launchers_gone(job: JobSeries, running: Mapping[str, set[int]]) -> bool:
    """Whether every launcher the job had is gone from its host's latest sample (running:
    host -> the launchers it saw; a host that has not sampled since says nothing)."""
    return bool(job.launchers) and all(
        host in running and pid not in running[host] for host, pid in job.launchers)
