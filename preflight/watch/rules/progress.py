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


def readable(live: Sequence[RankSeries], unit: Unit) -> list[RankSeries]:
    """The ranks whose pace can be read in the job's unit: where only rank 0 prints step
    lines, its peers' logs grow without them, and their pace is no figure of the job's."""
    return [r for r in live if r.early_rate.get(unit)]


def pace_line(job: JobSeries, live: Sequence[RankSeries], unit: Unit,
              policy: WatchPolicy, phased: bool = False) -> Finding:
    rates, early = _paces(live, unit, policy)
    paced = readable(live, unit)
    pace = f", {median(rates):.3g} {UNIT_WORDS[unit]}/s a rank" if rates else ""
    if paced and len(paced) < len(live):
        n = len(paced)
        whose, its = (f"{paced[0].rid.name()}'s", "its") if n == 1 else (f"{n} ranks'", "their")
        pace += f" (from {whose} {UNIT_WORDS[unit]} alone: {its} {len(live) - n} peers print none)"
    # Said as what was compared: the rules differ by the kind of job.
    if any(r.rid.role in ("trainer", "server") for r in live):
        compared = (f"no trainer below {1 - policy.margin:g} x its peers' median pace, no "
                    "server short of CPU")
    else:
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


def slowed_unexplained(job: JobSeries, live: Sequence[RankSeries], unit: Unit,
                       policy: WatchPolicy, for_s: float) -> Finding:
    """The job below its early pace (job_slowed) for for_s with nothing the watch measures
    setting a rank, host or link apart: never a pass. A warning that says what was
    measured, naming nobody (what slows it is not seen from outside: its data, a longer step
    of its own); never acted on."""
    rates, early = _paces(live, unit, policy)
    now, then = (median(rates) if rates else 0.0), (median(early) if early else 0.0)
    ratio = now / then if then else 0.0
    return WatchFinding(
        "progress", Status.WARN, tuple(job.hosts()),
        f"the job {job.key} steps at {ratio:.2f} x its early pace ({now:.3g} against "
        f"{then:.3g} {UNIT_WORDS[unit]}/s a rank) for {for_s:.0f} s, and nothing the "
        "watch measures sets a rank, host or "
        "link apart (busy shares, waits for a CPU and throttling against the peers', send "
        "queues against those at its pace, GPU clocks, ranks frozen or in D): what slows it "
        "is not seen from outside (its data, its storage, a longer step of its own); nobody "
        "is named, nothing is acted on",
        {"pace_ratio": round(ratio, 3), "slowed_s": round(for_s, 1)})


def _paces(live: Sequence[RankSeries], unit: Unit,
           policy: WatchPolicy) -> tuple[list[float], list[float]]:
    """(each readable rank's pace over the window, each one's early pace); every rank's
    where none is readable yet."""
    ranks = readable(live, unit) or list(live)
    rates = []
    for r in ranks:
        span = r.span(r.latest.t - policy.persist_s, r.latest.t, unit)
        if span is not None and span.dt > 0 and span.progress is not None:
            rates.append(span.progress / span.dt)
    early = [e for r in ranks if (e := r.early_rate.get(unit))]
    return rates, early
