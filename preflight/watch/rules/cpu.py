"""Stragglers by CPU and pace: in a collective job the rank busy while its peers wait where
something on its host holds it (unless it is the job's shape: so from its first steps; with
nothing on its host holding it, a phase of the job's own: rules/phases.py); in a PS job the
trainer slower than its peers, the server that holds every trainer, the server short of
CPU."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.model.findings import Finding, Status
from preflight.model.watch import Blame, RankId, WatchFinding, WatchPolicy
from preflight.watch.medians import Pool, median
from preflight.watch.rules.phases import phase_line
from preflight.watch.rules.shared import (
    BUSY_MORE,
    BUSY_RATIO,
    RUNQUEUE_SHARE,
    AtCheck,
    fallen_pace,
    full_pairs,
    held_by_host,
    host_pressed,
    is_saturated,
    is_throttled,
    job_slowed,
    rank_halves,
    wait_per_run,
    why_short,
)
from preflight.watch.series import (
    UNIT_WORDS,
    JobSeries,
    RankSeries,
    Span,
    Unit,
)

MIN_COUNT = 8  # steps (or lines) a half-window of a typical rank must count to judge paces


def slower_trainers(group: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                    at_check: Mapping[str, AtCheck], job: JobSeries) -> list[Finding]:
    """Ranks whose progress rate is below (1 - margin) x their peers' median in both halves
    of the window: in a PS job in async mode, a trainer slow on its own."""
    halves = {r.rid: rank_halves(r, unit, policy) for r in group}
    rates: dict[RankId, tuple[float, float]] = {}
    counts: list[int] = []
    for rid, h in halves.items():
        if h is not None and h[0].progress is not None and h[1].progress is not None:
            rates[rid] = (h[0].progress / h[0].dt, h[1].progress / h[1].dt)
            counts += [h[0].progress, h[1].progress]
    if not counts or median(counts) < MIN_COUNT:
        return []  # too few steps (or step lines) in a half to tell paces apart
    out: list[Finding] = []
    pools = [Pool(v[i] for v in rates.values()) for i in (0, 1)]
    for r in group:
        if r.rid not in rates or len(rates) < 2:
            continue
        own = rates[r.rid]
        ref = [pools[i].median_without(own[i]) or 0.0 for i in (0, 1)]
        if all(ref[i] > 0 and own[i] < (1 - policy.margin) * ref[i] for i in (0, 1)):
            score = own[1] / ref[1]
            sync = r.rid.role == "worker"
            h = halves[r.rid]
            assert h is not None
            out.append(WatchFinding(
                "straggler", Status.FAIL if sync else Status.WARN, (r.rid.host,),
                f"{r.rid.name()} steps at {score:.2f} of its peers' median "
                f"({own[1]:.3g} vs {ref[1]:.3g} {UNIT_WORDS[unit]}/s for "
                f"{policy.persist_s:g} s)" + why_short(r, h[1], at_check)
                + ("" if sync else "; in async mode it slows only itself"),
                {"score": score}, blame=Blame("pace", ranks=(r.rid,))))
    return out


class _Starts:
    """Each rank's busy shares over the halves of its first window and over its first
    interval, with the pools its peers' medians are read from: what busier_ranks asks of a
    rank set apart (a few, where thousands are judged), so made once one is."""

    def __init__(self, group: Sequence[RankSeries]) -> None:
        self.early = {r: (r.early[0].busy_s / r.early[0].dt, r.early[1].busy_s / r.early[1].dt)
                      for r in group if r.early is not None}
        self.early_pools = [Pool(v[i] for v in self.early.values()) for i in (0, 1)]
        self.firsts = {r: r.first_step.busy_s / r.first_step.dt for r in group
                       if r.first_step is not None and r.first_step.dt > 0}
        self.first_pool = Pool(self.firsts.values())


def busier_ranks(group: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                 at_check: Mapping[str, AtCheck], job: JobSeries, named: Sequence[RankId],
                 pressure: Optional[Mapping[str, float]] = None) -> list[Finding]:
    """The rank that keeps busy while its peers wait: its busy share at least BUSY_RATIO x
    theirs and BUSY_MORE above, in both halves of the window. Said as the job's shape where
    it was so from its first steps; as a phase where nothing on its host holds it (no quota
    throttling it, no longer wait for a CPU per second run than its peers', or where they
    hardly ran, no more CPU pressure on its host than on theirs: rules/shared.py's
    held_by_host; pressure: each host's PSI); else a straggler, with what holds it."""
    # Keyed by the series, not its RankId: hashed by identity, in C (thousands of ranks).
    halves = {r: rank_halves(r, unit, policy) for r in group}
    busy = {r: (h[0].busy_s / h[0].dt, h[1].busy_s / h[1].dt)
            for r, h in halves.items() if h is not None}
    out: list[Finding] = []
    pools = [Pool(v[i] for v in busy.values()) for i in (0, 1)]
    floors = [p.least_without() or 0.0 for p in pools]
    starts: Optional[_Starts] = None  # the ranks' early shares, made once one is set apart
    per_run: Optional[Pool] = None  # each rank's wait for a CPU per second run, made once asked
    for r in group:
        if r not in busy or r.rid in named or len(busy) < 2:
            continue
        own = busy[r]
        # Below the bar of the lowest median its peers can have: not busier, whoever it is
        # (most ranks: their peers' medians are not worked out).
        if any(own[i] < BUSY_RATIO * floors[i] + BUSY_MORE for i in (0, 1)):
            continue
        ref = [pools[i].median_without(own[i]) or 0.0 for i in (0, 1)]
        if all(own[i] >= BUSY_RATIO * ref[i] + BUSY_MORE for i in (0, 1)):
            h = halves[r]
            assert h is not None
            starts = starts or _Starts(group)
            was = starts.early.get(r)
            peers_was = None if was is None or len(starts.early) < 2 else [
                starts.early_pools[i].median_without(was[i]) or 0.0 for i in (0, 1)]
            first = starts.firsts.get(r)
            peers_first = None if first is None else starts.first_pool.median_without(first)
            if was is not None and peers_was is not None \
                    and _shape(r, h, was, peers_was, peers_first):
                out.append(WatchFinding(
                    "shape", Status.PASS, (r.rid.host,),
                    f"{r.rid.name()} is busier than its peers ({own[1]:.2f} cores, they "
                    f"{ref[1]:.2f}) as it was from the start ({was[1]:.2f}, they "
                    f"{peers_was[1]:.2f}): the job's shape (a rank that also evaluates, logs "
                    "or checkpoints), not a straggler; named once it gets busier than that, "
                    "throttled or short of a CPU"))
                continue
            if per_run is None:
                per_run = Pool(x for h2 in halves.values()
                               if h2 is not None and (x := wait_per_run(h2[1])) is not None)
            mine = wait_per_run(h[1])
            peers_per_run = per_run.median_without(*(() if mine is None else (mine,)))
            pressed = host_pressed(r.rid.host, [x.rid.host for x in group], pressure or {})
            if not held_by_host(h[1], peers_per_run, pressed):
                # Nothing on its host holds it: the job's own work (an evaluation, a save),
                # a phase, not a fault to act on (rules/phases.py).
                out.append(phase_line(r, h, own[1], ref[1], len(group) - 1, policy))
                continue
            out.append(WatchFinding(
                "straggler", Status.FAIL, (r.rid.host,),
                f"{r.rid.name()} holds its {len(group) - 1} peers back: busy "
                f"{own[1]:.2f} cores (on a CPU or waiting for one) while they wait ({ref[1]:.2f}) "
                f"for {policy.persist_s:g} s" + why_short(r, h[1], at_check),
                {"busy": own[1], "peers_busy": ref[1]}, blame=Blame("cpu", ranks=(r.rid,))))
    return out


def starved_ranks(group: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                  at_check: Mapping[str, AtCheck], named: Sequence[RankId]) -> list[Finding]:
    """Once the job's pace fell, the collective rank short of CPU where its peers are not:
    throttled by its quota, or waiting for a CPU at least BUSY_RATIO x theirs and BUSY_MORE
    above, in both halves of the window. What busier_ranks cannot see where the ranks that
    wait spin (NCCL's busy waits on GPUs: every rank busy a core, the starved one no busier
    than its peers). A job at its pace is held by nobody, whatever its ranks wait for."""
    if not job_slowed(group, unit, policy):
        return []
    spans = {r: h for r in group if (h := rank_halves(r, unit, policy)) is not None}
    if len(spans) < 2:
        return []
    waits = [Pool(h[i].wait_s / h[i].dt for h in spans.values()) for i in (0, 1)]
    throttled = [Pool(float(is_throttled(h[i])) for h in spans.values()) for i in (0, 1)]
    out: list[Finding] = []
    for r in group:
        h = spans.get(r)
        if h is None or r.rid in named:
            continue
        own = [h[i].wait_s / h[i].dt for i in (0, 1)]
        if any(own[i] < RUNQUEUE_SHARE and not is_throttled(h[i]) for i in (0, 1)):
            continue  # short of CPU in neither way in a half: no peers' figures change that
        usual = [waits[i].median_without(own[i]) or 0.0 for i in (0, 1)]
        peers_throttled = [throttled[i].median_without(float(is_throttled(h[i]))) or 0.0
                           for i in (0, 1)]
        if not all((is_throttled(h[i]) and peers_throttled[i] < 0.5) or (
                own[i] >= RUNQUEUE_SHARE and own[i] >= BUSY_RATIO * usual[i] + BUSY_MORE)
                for i in (0, 1)):
            continue
        paces = [p for x in group if (p := fallen_pace(x, unit, policy)) is not None]
        out.append(WatchFinding(
            "straggler", Status.FAIL, (r.rid.host,),
            f"{r.rid.name()} is short of CPU while its {len(group) - 1} peers are not, and "
            f"the job steps at {min(paces):.2f} x its early pace for {policy.persist_s:g} s"
            + why_short(r, h[1], at_check) + f"; its peers wait for a CPU {usual[1]:.2f} s a "
            "second", {"wait": own[1], "peers_wait": usual[1]},
            blame=Blame("cpu", ranks=(r.rid,))))
    return out


def _shape(r: RankSeries, h: tuple[Span, Span], was: tuple[float, float],
           peers_was: Sequence[float], peers_first: Optional[float]) -> bool:
    """Whether a rank busier than its peers is so by the job's design: it was as much busier
    through its first interval and both halves of its first window, computing (not waiting
    for a CPU, nor throttled: a quota or other work there before the watch came is a fault
    all the same), and nothing of it changed since: it is not busier now than then, not
    throttled, and it waits for a CPU no longer than it did. A fault planted after the
    watch began leaves its first interval like its peers', and it is judged on its peers."""
    assert r.early is not None
    first = r.first_step
    if first is None or peers_first is None or first.dt <= 0:
        return False
    bar = [BUSY_RATIO * x + BUSY_MORE for x in (*peers_was, peers_first)]
    if not all(v >= b for v, b in zip((*was, first.busy_s / first.dt), bar)):
        return False
    if any(is_throttled(x) or x.wait_s / x.dt >= RUNQUEUE_SHARE for x in r.early):
        return False
    now = h[1]
    busier = now.busy_s / now.dt >= max(was) + BUSY_MORE
    waits = now.wait_s / now.dt >= max(x.wait_s / x.dt for x in r.early) + BUSY_MORE
    return not (busier or is_throttled(now) or waits)


def server_holds_trainers(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                          at_check: Mapping[str, AtCheck]) -> list[Finding]:
    """In a PS job, a server that holds every trainer: all trainers step below (1 - margin)
    of their own early pace through the window, alike, while a server is saturated (its
    quota throttles it, or it waits for a CPU). A trainer slow on its own is slower_trainers's."""
    trainers = [r for r in live if r.rid.role == "trainer"]
    servers = [r for r in live if r.rid.role == "server"]
    if not trainers or not servers:
        return []
    paces = []
    for r in trainers:
        pace = fallen_pace(r, unit, policy)
        if pace is None:
            return []
        paces.append(pace)
    out: list[Finding] = []
    for r in servers:
        h = rank_halves(r, unit, policy)
        if h is None or not all(is_saturated(span) for span in h) or _saturated_by_design(r, h):
            continue
        out.append(WatchFinding(
            "straggler", Status.FAIL, (r.rid.host,),
            f"{r.rid.name()} holds every trainer: the {len(trainers)} trainers step at "
            f"{min(paces):.2f}-{max(paces):.2f} of their pace at the start, alike, for "
            f"{policy.persist_s:g} s" + why_short(r, h[1], at_check),
            {"paces": tuple(paces)}, blame=Blame("cpu", ranks=(r.rid,))))
    return out


def _saturated_by_design(r: RankSeries, h: tuple[Span, Span]) -> bool:
    """Whether a server saturated now was so from its start, as much (on cores it shares
    from the start, under a quota it had then): the job's shape, not what slowed its
    trainers since. Not where it waits for a CPU longer now, or is throttled where it was not."""
    if r.early is None or not all(is_saturated(x) for x in r.early):
        return False
    now = h[1]
    newly = is_throttled(now) and not all(is_throttled(x) for x in r.early)
    more = now.wait_s / now.dt >= max(x.wait_s / x.dt for x in r.early) + BUSY_MORE
    return not (newly or more)


def starved_servers(live: Sequence[RankSeries], unit: Unit, policy: WatchPolicy,
                    at_check: Mapping[str, AtCheck], addresses: Mapping[str, str],
                    explained: set[str]) -> list[Finding]:
    """A PS server short of CPU through both halves of the window (its quota throttles it,
    or it waits for a CPU far longer than the job's other ranks do), and more so than from
    its start. In async PS its trainers
    step on at their own pace while it falls behind (seen with Paddle 2.6.2: 45 steps a
    second before and after a 0.05-core quota on the server, throttled in 95-100 % of its
    periods): it warns, the trainers' updates reaching it late. Where their send queues to
    it stay full as well, it holds them (fail), and that is the server's CPU, not the link.
    A trainer slowed alike with its peers is server_holds_trainers'; a collective job's
    starved worker is busier_ranks's (busy while its peers wait)."""
    if not any(r.rid.role == "server" for r in live):
        return []
    halves = {r.rid: rank_halves(r, unit, policy) for r in live}
    pairs = full_pairs(live, policy.persist_s, addresses, explained)
    out: list[Finding] = []
    waits = Pool(x[i].wait_s / x[i].dt for x in halves.values() if x is not None
                 for i in (0, 1))
    for r in live:
        h = halves[r.rid]
        if r.rid.role != "server" or h is None or r.rid.host in explained:
            continue
        # Waiting for a CPU is judged against the others' waits, known once their window
        # is covered too (ranks on shared cores all wait some).
        usual = waits.median_without(*(span.wait_s / span.dt for span in h))
        if usual is None:
            usual = math.inf
        if not all(is_throttled(span) or span.wait_s / span.dt >= max(
                RUNQUEUE_SHARE, BUSY_RATIO * usual + BUSY_MORE) for span in h):
            continue
        # Judged against its own start: a server on a CPU limit, or on cores it shares, as
        # much from its first window on is the job's shape (its trainers' pace was learned
        # with it so); until that window is known, it is not judged.
        if r.early is None or _saturated_by_design(r, h):
            continue
        host = r.rid.host
        full = {p: q for p, q in pairs.items() if p[1] == host}
        said = ", ".join(f"{a}->{b} {q >> 10} KiB" for (a, b), q in sorted(full.items()))
        out.append(WatchFinding(
            "straggler", Status.FAIL if full else Status.WARN, (host,),
            f"{r.rid.name()} is short of CPU for {policy.persist_s:g} s"
            + why_short(r, h[1], at_check) + (
                f"; its trainers' data to it waits in full send queues ({said})" if full
                else "; its trainers step on at their own pace, their updates reaching it "
                "late"),
            blame=Blame("cpu", ranks=(r.rid,), pairs=tuple(full))))
        explained.add(host)
    return out
