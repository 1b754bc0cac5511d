"""What the watch could not measure (progress that cannot be read, CPU times the kernel
does not keep), and the pass line of
a healthy job, saying what was compared."""

from __future__ import annotations

from collections.abc import Sequence

from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import WatchFinding, WatchPolicy
from preflight.watch.medians import median
from preflight.watch.series import (
    UNIT_WORDS,
    JobSeries,
    RankSeries,
    Unit,
)


def progress_unread(live: Sequence[RankSeries]) -> list[Finding]:
    """Per host, its ranks whose progress the sampler cannot read: a stdout that is not a
    file (a pipe, a terminal) and no step hook, or a process it may not read (another
    user's). Their pace is compared with nobody's: said with the fix, never passed."""
    why: dict[str, list[str]] = {}
    for r in live:
        s = r.latest
        if s.hook_steps is not None or s.log_size is not None:
            continue
        if s.error and "Permission" in s.error:
            why.setdefault(r.rid.host, []).append(
                f"{r.rid.name()} cannot be read by the watch's user ({s.error[:120]}): run "
                "the watch as the job's user or as root")
        elif s.log_path is not None:
            why.setdefault(r.rid.host, []).append(
                f"{r.rid.name()} writes to {s.log_path}, not a file, and calls no step hook: "
                "call preflight.watch.step() once a step, or send its output to a file")
    return [WatchFinding("progress", Status.WARN, (host,),
                         f"could not check progress on {host}: " + "; ".join(said)
                         + "; its pace is compared with nobody's")
            for host, said in sorted(why.items())]


def cpu_untimed(live: Sequence[RankSeries]) -> list[Finding]:
    """The hosts whose kernel does not keep a rank's time on and waiting for a CPU (no
    schedstat): the CPU rules cannot judge their ranks. One finding, as the cause is one
    kind of kernel: said, never passed."""
    untimed = [r for r in live if not r.latest.timed]
    if not untimed:
        return []
    hosts = sorted({r.rid.host for r in untimed})
    return [WatchFinding("cpu", Status.WARN, tuple(hosts),
                         f"could not check CPU on {hostlist(hosts)}: the kernel gives no "
                         "/proc/PID/schedstat (built without CONFIG_SCHED_INFO, or a sandbox "
                         f"such as gVisor), so the time {len(untimed)} of {len(live)} ranks "
                         "spend on and waiting for a CPU is unknown; a rank starved of CPU "
                         "there is not named: run the job on a kernel that keeps schedstat")]


def pace_line(job: JobSeries, live: Sequence[RankSeries], unit: Unit,
              policy: WatchPolicy, phased: bool = False) -> Finding:
    rates = []
    for r in live:
        span = r.span(r.latest.t - policy.persist_s, r.latest.t, unit)
        if span is not None and span.dt > 0 and span.progress is not None:
            rates.append(span.progress / span.dt)
    pace = f", {median(rates):.3g} {UNIT_WORDS[unit]}/s a rank" if rates else ""
    # Said as what was compared: the rules differ by the kind of job.
    if any(r.rid.role in ("trainer", "server") for r in live):
        compared = (f"no trainer below {1 - policy.margin:g} x its peers' median pace, no "
                    "server short of CPU")
    else:
        early = [r.early_rate[unit] for r in live if r.early_rate.get(unit)]
        compared = ("none busy while its peers wait for it but in a phase of the job's own"
                    if phased else "none busy while its peers wait for it") + (
            f"; the job at {median(rates) / median(early):.2f} x its early pace"
            if rates and early else "")
    if not rates:
        compared += ("; no pace compared yet (fewer than two samples of their progress over "
                     "the window)")
    return WatchFinding("progress", Status.PASS, tuple(job.hosts()),
                        f"{len(live)} ranks of {job.key} running{pace}; none stopped; "
                        f"{compared}")
