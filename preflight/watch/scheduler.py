"""The job's end as its scheduler says it. A watch that follows a Slurm job (--jobid, or the
one `preflight launch --transport slurm` submitted) runs its samplers as steps of that job:
when the job ends, they end with it, and their silence is the job's end, not a host that
could not be checked. A job cancelled (scancel), timed out or preempted was stopped as a
whole: no rank or host of it is to blame, however its ranks ended."""

from __future__ import annotations

from collections.abc import Sequence

from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import SCHEDULER_GONE, Blame, SchedulerEnd, WatchFinding


def findings(end: SchedulerEnd, judged: Sequence[Finding], hosts: Sequence[str],
             unreached: Sequence[Finding] = ()) -> list[Finding]:
    """What is said once the scheduler no longer runs the job: while it is ending, that it
    is (nothing else: its steps are being stopped); once stopped as a whole, that, blaming
    nobody; once ended of itself, the judgement of its ranks' ends, the samplers' silence
    left out, and Slurm's word where nothing judged says why it failed."""
    names = tuple(sorted(hosts))
    where = hostlist(names)
    if not end.final:
        return [Finding("ended", Status.SKIP, names,
                        f"the Slurm job {end.job} on {where} is ending (Slurm's state "
                        f"{end.state}): how it ended is said once Slurm has ended its steps")]
    if end.stopped is not None:
        return [WatchFinding(
            "ended", Status.WARN, names,
            f"the Slurm job {end.job} on {where} {end.stopped} (Slurm's state {end.state}"
            + (f", {end.reason}" if end.reason else "")
            + "): the job was stopped as a whole, no rank or host to blame",
            {"scheduler_state": end.state}, blame=Blame("job-stopped", job=f"slurm {end.job}"))]
    # The samplers ended with the job (their silence is no host's); a host never reached
    # is still said: its ranks were never watched.
    out = [*unreached, *(f for f in judged if f.check != "watch")]
    if end.state in ("COMPLETED", SCHEDULER_GONE):
        if not any(f.check == "ended" or f.status is Status.FAIL for f in out):
            out.append(Finding("ended", Status.PASS, names,
                               f"the Slurm job {end.job} on {where} completed")
                       if end.state == "COMPLETED" else
                       Finding("ended", Status.SKIP, names,
                               f"the Slurm job {end.job} on {where} has ended: {end.reason}"))
    elif not any(f.status is Status.FAIL for f in out):
        # FAILED, NODE_FAIL, OUT_OF_MEMORY...: where no rank's end said why, Slurm's word.
        out.append(Finding(
            "ended", Status.WARN, names,
            f"the Slurm job {end.job} on {where} ended {end.state}"
            + (f" ({end.reason})" if end.reason else "")
            + "; how its ranks ended says no more", {"scheduler_state": end.state}))
    return out
