"""Phases of the job's own: a rank busy while its peers wait with nothing on its host holding
it (no CPU quota throttling it, no wait for a CPU), every rank writing files with no step, and
every rank of a job without GPUs computing with no step, and a PS server busier than from
its start while its trainers' queues to it fill. Rank 0 evaluating, saving a checkpoint or
logging; a sharded save on every rank; an evaluation on every rank; a server saving its
tables. Each is said
as a pass line with what tells it (the bytes it writes, its log's last line, its earlier
spells and their cadence), never as a straggler or a hang, and never acted on: an action
needs a cause that outlasts the job's phases and lives on the host it acts on.

A phase is a warning once it runs far longer than the rank's own earlier phases, or past
--phase-max: a phase that does not end, or a rank slower than its peers with no cause its
host shows (its CPU's clock, its data). What a judgement leaves for the next is on the job
(JobSeries.phases): each rank's open spell and the lengths of those that ended."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Optional

from preflight.common.units import mbytes
from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, RankId, WatchFinding, WatchPolicy, blame_of
from preflight.watch.medians import Pool, median
from preflight.watch.rules.shared import (
    BUSY_MORE,
    BUSY_RATIO,
    full_pairs,
    held_by_host,
    is_saturated,
    rank_halves,
    wait_per_run,
)
from preflight.watch.series import JobSeries, RankSeries, Span, Unit, WatchState

# Bytes a second a rank writes through the storage layer that say it saves (a checkpoint,
# its logs at most a few KB/s).
WRITE_BPS = 1 << 20
# A phase this many times longer than the rank's longest earlier one, and this long at
# least, no longer looks like the job's own rhythm.
LONG_RATIO, LONG_FLOOR_S = 3.0, 120.0
# Cores on a CPU (not waiting for one) each rank of a job with no step keeps through the
# window for the job to be computing on every rank (an evaluation), not hung.
COMPUTING = 0.5
# What a phase's log line says where the user gave no --phase-pattern: a save, or an
# evaluation (the time share tells the two apart: watch/timeshare.py).
SAVE_WORDS = r"checkpoint|ckpt|\bsav(e|ed|es|ing)\b"
EVAL_WORDS = r"\beval|validat|\btest(ing)?\b|\binfer"
PHASE_WORDS = f"{SAVE_WORDS}|{EVAL_WORDS}"


def phase_line(r: RankSeries, h: tuple[Span, Span], own: float, ref: float, peers: int,
               policy: WatchPolicy) -> Finding:
    """A rank busier than its peers (busier_ranks) with nothing on its host holding it."""
    told, kind = _told(r, h[0].t0, policy)
    return WatchFinding(
        "phase", Status.PASS, (r.rid.host,),
        f"{r.rid.name()} is in a phase of the job's own: busy {own:.2f} cores while its "
        f"{peers} peers wait ({ref:.2f}), with nothing on {r.rid.host} holding it (no quota "
        f"throttling it, no longer wait for a CPU per second run than its peers'){told}; not "
        "a straggler",
        {"busy": own, "peers_busy": ref, "phase": kind}, blame=Blame("phase", ranks=(r.rid,)))


def serving(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
            addresses: Mapping[str, str], explained: set[str]) -> list[Finding]:
    """A PS server busier than from its start through both halves of the window (BUSY_RATIO
    x its early busy share, and BUSY_MORE more) on a CPU, nothing on its host holding it (no
    quota throttling it, no wait for a CPU), while its trainers' send queues to it stay
    full: its own work (saving its tables, a burst of requests) keeps it from reading them
    as fast: a phase of the job's own, said, and no slow link of its host's."""
    out: list[Finding] = []
    pairs: Optional[dict[tuple[str, str], int]] = None
    for r in live:
        host = r.rid.host
        if r.rid.role != "server" or host in explained or r.early is None:
            continue
        h = rank_halves(r, unit, policy)
        early = max(x.busy_s / x.dt for x in r.early)
        if h is None or any(is_saturated(x) for x in h) or \
                min(x.busy_s / x.dt for x in h) < BUSY_RATIO * early + BUSY_MORE:
            continue
        if pairs is None:
            pairs = full_pairs(live, policy.persist_s, addresses, explained)
        full = sorted((p, q) for p, q in pairs.items() if p[1] == host)
        if not full:
            continue
        told, kind = _told(r, h[0].t0, policy)
        own = min(x.busy_s / x.dt for x in h)
        said = ", ".join(f"{a}->{b} {q >> 10} KiB" for (a, b), q in full)
        out.append(WatchFinding(
            "phase", Status.PASS, (host,),
            f"{r.rid.name()} is in a phase of the job's own: busy {own:.2f} cores against "
            f"{early:.2f} from its start, with nothing on {host} holding it (no quota "
            f"throttling it, no wait for a CPU){told}; its trainers' data to it waits in full "
            f"send queues ({said}) as it reads them late: not its link",
            {"busy": own, "early_busy": early, "phase": kind},
            blame=Blame("phase", ranks=(r.rid,))))
    return out


def every_rank_writes(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
                      quiet_s: float) -> Optional[Finding]:
    """With no step for quiet_s on any rank (a hang's shape), every rank writing files through
    the window: a save on every rank (a sharded checkpoint), not a hang; past --phase-max a
    warning (never acted on)."""
    rates = [write_rate(r, r.latest.t - policy.persist_s) for r in live]
    if not rates or any(w is None or w < WRITE_BPS for w in rates):
        return None
    total = sum(w for w in rates if w is not None)
    long = quiet_s > policy.phase_max_s
    return WatchFinding(
        "phase", Status.WARN if long else Status.PASS, tuple(job.hosts()),
        f"every one of {len(live)} ranks writes files ({mbytes(total)} in all) with "
        f"no step for {quiet_s:.0f} s: a save of the job's own (a sharded checkpoint), not a "
        "hang" + (f"; past --phase-max {policy.phase_max_s:g} s: a save that does not end "
                  "(a filesystem that slowed, a loop writing logs); not acted on"
                  if long else ""),
        {"quiet_s": quiet_s, "phase_s": quiet_s, "phase": "checkpoints"}, blame=Blame("phase"))


def every_rank_computes(job: JobSeries, live: Sequence[RankSeries], policy: WatchPolicy,
                        quiet_s: float) -> Optional[Finding]:
    """With no step for quiet_s on any rank (a hang's shape), every rank of a job without
    GPUs busy computing through the window (COMPUTING cores or more, nothing on its host
    holding it): an evaluation or a long step of the job's own on every rank, not a hang:
    ranks hung in a collective sleep (gloo waits in the kernel). Not where a rank drives a
    GPU: NCCL's waits spin, and a job hung in NCCL keeps every rank busy too. Past
    --phase-max a warning (never acted on)."""
    if len(live) < 2 or any(r.latest.gpus for r in live):
        return None
    shares = []
    for r in live:
        span = r.span(r.latest.t - policy.persist_s, r.latest.t, "bytes")
        if span is None or span.dt <= 0 or is_saturated(span) or \
                (span.busy_s - span.wait_s) / span.dt < COMPUTING:
            return None
        shares.append(span.busy_s / span.dt)
    long = quiet_s > policy.phase_max_s
    return WatchFinding(
        "phase", Status.WARN if long else Status.PASS, tuple(job.hosts()),
        f"every one of {len(live)} ranks computes (busy {min(shares):.2f}-{max(shares):.2f} "
        f"cores, nothing on its host holding it) with no step for {quiet_s:.0f} s: an "
        "evaluation or a long step of the job's own on every rank, not a hang (ranks hung in "
        "a collective sleep)" + (f"; past --phase-max {policy.phase_max_s:g} s: work that "
                                 "does not end (a loop); not acted on" if long else ""),
        {"quiet_s": quiet_s, "phase_s": quiet_s, "phase": "evaluations"}, blame=Blame("phase"))


def quiet_for(live: Sequence[RankSeries], unit: Unit) -> float:
    """Seconds since the last progress of the rank that progressed last (0 where none has
    been seen to progress)."""
    grown = [r.latest.t - r.last_growth[unit] for r in live if unit in r.last_growth]
    return min(grown) if grown else 0.0


def busy_alone(live: Sequence[RankSeries], policy: WatchPolicy, quiet_s: float) -> bool:
    """With no step for quiet_s on any rank (a hang's shape), whether a rank keeps busy through
    the window while its peers wait, with nothing on its host holding it: a phase of the job's
    own (a long save on rank 0), not a hang; the CPU rules say it (past --phase-max, a
    warning)."""
    if len(live) < 2:
        return False
    shares = {}
    for r in live:
        s = r.span(r.latest.t - policy.persist_s, r.latest.t, "bytes")
        if s is None or s.dt <= 0:
            return False
        shares[r.rid] = s
    pool = Pool(s.busy_s / s.dt for s in shares.values())
    per_run = Pool(x for s in shares.values() if (x := wait_per_run(s)) is not None)
    for s in shares.values():
        own = s.busy_s / s.dt
        ref = pool.median_without(own) or 0.0
        mine = wait_per_run(s)
        peers = per_run.median_without(*(() if mine is None else (mine,)))
        if own >= BUSY_RATIO * ref + BUSY_MORE and not held_by_host(s, peers):
            return True
    return False


def follow(job: JobSeries, found: list[Finding], state: WatchState,
           policy: WatchPolicy) -> list[Finding]:
    """The judgement's findings with each rank's phase said against its earlier ones: how long
    it has run, its earlier spells and their cadence; a warning where it runs far longer than
    they did, or past --phase-max. Spells that ended are kept on the job."""
    phased: set[RankId] = set()  # the ranks in a phase at this judgement
    out: list[Finding] = []
    for f in found:
        rids = blame_of(f).ranks
        if f.check != "phase" or len(rids) != 1 or rids[0] not in job.ranks:
            out.append(f)
            continue
        rid = rids[0]
        r = job.ranks[rid]
        t = state.at(rid.host, r.latest.t)
        phased.add(rid)
        spell = job.phases.setdefault(rid, [t - policy.persist_s, t])
        spell[1] = t
        out.append(_against_earlier(f, spell[1] - spell[0], job.phase_spells.get(rid, []),
                                    policy))
    for rid in [rid for rid in job.phases if rid not in phased]:
        start, last = job.phases.pop(rid)
        job.phase_spells.setdefault(rid, []).append((start, last - start))
    return out


def _against_earlier(f: Finding, length: float, earlier: Sequence[tuple[float, float]],
                     policy: WatchPolicy) -> Finding:
    data = {**f.data, "phase_s": length}
    lengths = [d for _, d in earlier]
    top = max(lengths, default=0.0)
    if length > policy.phase_max_s:
        why = f"past --phase-max {policy.phase_max_s:g} s"
    elif lengths and length >= LONG_FLOOR_S and length > LONG_RATIO * top:
        why = f"{length / top:.1f} x its longest earlier phase ({top:.0f} s)"
    else:
        said = ""
        if lengths:
            starts = [s for s, _ in earlier]
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            said = (f"; {len(lengths)} such before it ({min(lengths):.0f}-{top:.0f} s"
                    + (f", every {median(gaps):.0f} s" if gaps else "") + ")")
        return replace(f, message=f"{f.message}; for {length:.0f} s so far{said}", data=data)
    return replace(f, status=Status.WARN, data=data, message=(
        f"{f.message.removesuffix('; not a straggler')}; for {length:.0f} s, {why}: a phase "
        "that does not end, or a rank slower than its peers with no cause its host shows "
        "(its CPU's clock, its data, its GPU); not acted on"))


def _told(r: RankSeries, since: float, policy: WatchPolicy) -> tuple[str, str]:
    """What says which phase it is (the bytes it writes, its log's last line), and its kind
    for the time share: checkpoints (it writes, or its log says a save), evaluations (its
    log says one), else phases (untold: a rank computing alone)."""
    said, kind = "", "phases"
    rate = write_rate(r, since)
    if rate is not None and rate >= WRITE_BPS:
        said, kind = f"; it writes {mbytes(rate)} to files: a save", "checkpoints"
    line = next((s.log_last for s in reversed(r.samples) if s.log_last), None)
    if line and re.search(policy.phase_pattern or PHASE_WORDS, line, re.IGNORECASE):
        said += f"; its log says {line.strip()[:100]!r}"
        if kind == "phases" and re.search(SAVE_WORDS, line, re.IGNORECASE):
            kind = "checkpoints"
        elif kind == "phases" and re.search(EVAL_WORDS, line, re.IGNORECASE):
            kind = "evaluations"
    return said, kind


def write_rate(r: RankSeries, since: float) -> Optional[float]:
    """Bytes a second it wrote to storage since then; None where it was not read."""
    inside = [s for s in r.samples if s.t >= since and s.io_written is not None]
    if len(inside) < 2 or inside[-1].t <= inside[0].t:
        return None
    a, b = inside[0], inside[-1]
    assert a.io_written is not None and b.io_written is not None
    return (b.io_written - a.io_written) / (b.t - a.t)
