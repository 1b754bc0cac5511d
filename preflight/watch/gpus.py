"""What the ranks' GPUs say in a watch: pure functions from the hosts' GPU samples.

A GPU slowed through the persistence window (a hardware slowdown among its clock event
reasons, or its SM clock well below the clocks of the job's other GPUs while it is busy, or a
software cap where no other GPU of the job runs free of one) is named on the rank that drives
it: a software cap at the clock of peers that run free (a GPU at its power limit under heavy
load) is no slowdown. GPU figures corroborate; the job's progress is
the verdict: in a collective job, where the job's pace fell below (1 - margin) x its pace
at the start, the slowed GPU's rank is the straggler (every rank waits for it in the next
collective); otherwise it is a warning (the job may have run at that GPU's pace from the
start, and a PS trainer in async mode slows only itself). A rank another finding already
names gets its GPU said there, once.

In a hang, the ranks' GPUs tell a kernel that does not end (a collective stuck in NCCL keeps
its GPU at 100 %) from ranks that wait outside the GPU (idle): utilisation is liveness, not
progress, so it is said beside the hang, never instead of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

from preflight.common.gpuclock import slowdowns
from preflight.common.units import hostlist
from preflight.model.findings import Finding, Status
from preflight.model.watch import (
    NO_BLAME,
    Blame,
    GpuSample,
    HostSample,
    RankId,
    WatchFinding,
    WatchPolicy,
    blame_of,
)
from preflight.watch.medians import Pool
from preflight.watch.series import RankSeries, Unit, WatchState

BUSY_UTIL = 50  # % a GPU must be busy for its clock to be compared (idle GPUs clock down)
HUNG_UTIL = 90  # % of a GPU in a hang that runs a kernel that does not end
IDLE_UTIL = 5
# A capped GPU within this share of its free peers' clock runs at their clock: the cap holds
# it as the driver holds any GPU at its power limit, and it slows nobody.
CAP_AT_PEERS = 0.95


@dataclass(frozen=True)
class Slowed:
    rid: RankId
    gpu: int
    sm_mhz: Optional[int]
    sm_max_mhz: Optional[int]
    reasons: tuple[str, ...]  # its slowdowns, hardware first
    peers_mhz: Optional[float]  # the median SM clock of the job's other busy GPUs

    def said(self) -> str:
        clock = (f" at {self.sm_mhz} of {self.sm_max_mhz} MHz" if self.sm_mhz and
                 self.sm_max_mhz else f" at {self.sm_mhz} MHz" if self.sm_mhz else "")
        why = f" ({', '.join(self.reasons)})" if self.reasons else ""
        peers = f"; its peers' GPUs at {self.peers_mhz:.0f} MHz" if self.peers_mhz else ""
        return f"its GPU {self.gpu} runs{clock}{why}{peers}"


def window(state: WatchState, host: str, end: float, policy: WatchPolicy
           ) -> list[HostSample]:
    """The host's samples with GPUs over the persistence window ending at end; [] until the
    window is covered."""
    got = [s for s in state.hosts.get(host, ()) if s.gpus and s.t <= end]
    inside = [s for s in got if s.t >= end - policy.persist_s]
    if not got or got[0].t > end - policy.persist_s + policy.interval_s / 2 or len(inside) < 2:
        return []
    return inside


def _gpu(s: HostSample, index: int) -> Optional[GpuSample]:
    return next((g for g in s.gpus if g.index == index), None)


def slowed(ranks: Sequence[RankSeries], state: WatchState, policy: WatchPolicy
           ) -> list[Slowed]:
    """The ranks' GPUs slowed in every sample of the window."""
    drives = {(r.rid.host, i): r for r in ranks if r.samples for i in r.latest.gpus}
    if not drives:
        return []
    latest: dict[tuple[str, int], GpuSample] = {}
    for host, i in drives:
        samples = state.hosts.get(host)
        g = _gpu(samples[-1], i) if samples else None
        if g is not None:
            latest[(host, i)] = g
    out = []
    busy = {key: g.sm_mhz for key, g in latest.items() if g.sm_mhz and (g.util or 0) >= BUSY_UTIL}
    clocks = Pool(busy.values())
    capped = {key for key in busy if slowdowns(latest[key].reasons)}
    for (host, i), r in sorted(drives.items()):
        own = busy.get((host, i))
        ref = clocks.median_without(*(() if own is None else (own,)))
        # Its peers run free of any cap: a cap of its own at their clock is how the driver
        # holds a GPU under heavy load (H100s and H200s at their power limit), not a slowdown.
        peers_free = any(k not in capped for k in busy if k != (host, i))
        seen = [g for g in (_gpu(s, i) for s in window(state, host, r.latest.t, policy))
                if g is not None and g.error is None]
        if len(seen) >= 2 and all(_slow(g, ref, policy.margin, peers_free) for g in seen):
            g = seen[-1]
            out.append(Slowed(r.rid, i, g.sm_mhz, g.sm_max_mhz, tuple(slowdowns(g.reasons)),
                              ref))
    return out


def _slow(g: GpuSample, peers_mhz: Optional[float], margin: float,
          peers_free: bool = False) -> bool:
    """A hardware slowdown; or, while busy, a clock below its peers' by the margin, or a
    software cap that holds it below its peers' clock, or where its peers are capped too or
    there are none to compare (a software cap at the clock of peers that run free of one is
    the driver's way under load, no slowdown)."""
    said = slowdowns(g.reasons)
    if any(w.startswith("hardware") for w in said):
        return True
    behind = bool(peers_mhz and g.sm_mhz and g.sm_mhz < (1 - margin) * peers_mhz)
    lower = bool(peers_mhz and g.sm_mhz and g.sm_mhz < CAP_AT_PEERS * peers_mhz)
    # A software cap holds an idle GPU too, and an idle GPU clocks down: only while busy.
    return (g.util or 0) >= BUSY_UTIL and (behind or (bool(said) and (lower or not peers_free)))


def findings(ranks: Sequence[RankSeries], unit: Unit, state: WatchState,
             policy: WatchPolicy, found: Sequence[Finding]) -> list[Finding]:
    """The findings with the slowed GPUs said: on the finding that already names the rank,
    else a finding of their own (see the module's docstring). Returns every finding."""
    out = list(found)
    by_rank: dict[RankId, list[Slowed]] = {}
    for s in slowed(ranks, state, policy):
        by_rank.setdefault(s.rid, []).append(s)
    series = {r.rid: r for r in ranks}
    with_gpus = [r for r in ranks if r.samples and r.latest.gpus]
    if len(by_rank) >= 2 and len(by_rank) == len(with_gpus):
        # Every rank's GPU held alike (a power cap set for the whole cluster, a hot room):
        # the job runs at their pace, and no rank holds the others.
        hosts = sorted({rid.host for rid in by_rank})
        reasons = sorted({w for g in by_rank.values() for s in g for w in s.reasons})
        clocks = [s.sm_mhz for g in by_rank.values() for s in g if s.sm_mhz]
        return out + [WatchFinding(
            "gpu", Status.WARN, tuple(hosts),
            f"the GPUs of all {len(by_rank)} ranks are slowed alike"
            + (f" ({', '.join(reasons)})" if reasons else "")
            + (f", at {min(clocks)}-{max(clocks)} MHz" if clocks else "")
            + f" for {policy.persist_s:g} s: the job runs at their pace; no rank holds the "
            "others")]
    for rid, gpus in sorted(by_rank.items(), key=lambda x: (x[0].host, x[0].rank or 0)):
        said = "; ".join(s.said() for s in gpus)
        at = next((k for k, f in enumerate(out) if rid in blame_of(f).ranks), None)
        if at is not None and out[at].check == "phase":
            # Busy alone with its GPU slowed: the GPU holds it, not a phase of the job.
            del out[at]
            at = None
        if at is not None:
            out[at] = replace(out[at], message=f"{out[at].message}; {said}")
            continue
        fell = _pace_fell(series[rid], unit, policy)
        sync = rid.role == "worker"
        if sync and fell is not None:
            out.append(WatchFinding(
                "straggler", Status.FAIL, (rid.host,),
                f"{rid.name()} holds its peers back: {said}, and the job steps at "
                f"{fell:.2f} of its pace at the start for {policy.persist_s:g} s (every "
                "rank waits for it in the next collective)",
                {"gpus": tuple(s.gpu for s in gpus)}, blame=Blame("gpu", ranks=(rid,))))
        else:
            out.append(WatchFinding(
                "gpu", Status.WARN, (rid.host,),
                f"{rid.name()}: {said} for {policy.persist_s:g} s"
                + ("; in async mode it slows only itself" if not sync else
                   "; the job's pace has not fallen (it may have run at this GPU's pace "
                   "from the start)"),
                {"gpus": tuple(s.gpu for s in gpus)}))
    return out


def _pace_fell(r: RankSeries, unit: Unit, policy: WatchPolicy) -> Optional[float]:
    """The rank's pace over the window as a share of its early pace, where it fell below
    (1 - margin); None where it did not, or is not known yet."""
    early = r.early_rate.get(unit)
    span = r.span(r.latest.t - policy.persist_s, r.latest.t, unit)
    if not early or span is None or span.dt <= 0 or span.progress is None:
        return None
    share = span.progress / span.dt / early
    return share if share < 1 - policy.margin else None


def unreadable(hosts: Sequence[str], ranks: Sequence[RankSeries], state: WatchState
               ) -> list[Finding]:
    """The job's hosts whose GPUs could not be read now: a GPU lost (fallen off the bus: a
    failure, on the ranks that drive it), or GPUs that did not answer (could not check)."""
    drives: dict[tuple[str, int], list[str]] = {}
    for r in ranks:
        if r.samples:
            for i in r.latest.gpus:
                drives.setdefault((r.rid.host, i), []).append(r.rid.name())
    out: list[Finding] = []
    for host in hosts:
        samples = state.hosts.get(host)
        if not samples:
            continue
        last = samples[-1]
        if last.gpu_error:
            out.append(WatchFinding("gpu", Status.COULD_NOT_CHECK, (host,),
                                    f"{host}: its GPUs could not be read ({last.gpu_error}): "
                                    "a slowed GPU there cannot be named"))
        for g in last.gpus:
            if g.error is None:
                continue
            on = drives.get((host, g.index))
            lost = "GpuIsLost" in g.error or "GPU is lost" in g.error
            out.append(WatchFinding(
                "gpu", Status.FAIL if lost else Status.COULD_NOT_CHECK, (host,),
                f"{host}: GPU {g.index} does not answer ({g.error})"
                + (f"; {', '.join(on)} runs on it" if on else ""),
                blame=Blame("gpu") if lost else NO_BLAME))
    return out


def in_hang(ranks: Sequence[RankSeries], state: WatchState) -> str:
    """"; GPUs: 7 ranks' busy at 100 % (node[01-07]: kernels that do not end), 1 idle
    (node08)" from the hung ranks' GPUs now; "" where no rank's GPU is known."""
    busy: list[str] = []
    idle: list[str] = []
    other: list[str] = []
    top = 0
    for r in ranks:
        samples = state.hosts.get(r.rid.host)
        if not r.samples or not r.latest.gpus or not samples:
            continue
        utils = [g.util for g in (_gpu(samples[-1], i) for i in r.latest.gpus)
                 if g is not None and g.util is not None]
        if not utils:
            continue
        u = max(utils)
        top = max(top, u)
        (busy if u >= HUNG_UTIL else idle if u <= IDLE_UTIL else other).append(r.rid.host)
    parts = []
    if busy:
        parts.append(f"{len(busy)} ranks' busy at up to {top} % ({hostlist(busy)}: kernels "
                     "that do not end, as a collective stuck in NCCL)")
    if other:
        parts.append(f"{len(other)} partly busy ({hostlist(other)})")
    if idle:
        parts.append(f"{len(idle)} idle ({hostlist(idle)}: "
                     + ("not in the collective the others are stuck in)" if busy else
                        "the ranks wait outside the GPU)"))
    return "; GPUs: " + ", ".join(parts) if parts else ""


def host_gpus(state: WatchState) -> list[tuple[str, GpuSample]]:
    """Each host's GPUs in its last sample (for the metrics)."""
    return [(h, g) for h, s in sorted(state.hosts.items()) if s for g in s[-1].gpus]


def slowed_now(g: GpuSample) -> bool:
    return _slow(g, None, 0.0)

