"""An all-reduce's outcome from what its hosts printed and what the controller saw: its
figures, or which hosts kept it from finishing and why (failed first, never joined, stopped
beating, cut while slow, a stall nobody is to blame for, out of its own time)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Optional

from preflight.common.remote import Done
from preflight.model.measure import AllReduce, Backend, SizeResult
from preflight.network import progress as P
from preflight.network.allreduce_cmd import HINT, AllReduceOptions
from preflight.network.allreduce_log import log_of, log_reason
from preflight.network.allreduce_watch import Watch, finished_anyway
from preflight.network.paddle_job import Member


def _sizes(r: Optional[P.RankProgress], ranks: int) -> tuple[SizeResult, ...]:
    return () if r is None else tuple(SizeResult(b, s, ranks) for b, s in r.sizes)


def summarise(members: Sequence[Member], backend: Backend, ranks: int, names: tuple[str, ...],
               results: Mapping[str, Done], ended: Sequence[str], opts: AllReduceOptions,
               wall: float, watch: Watch) -> AllReduce:
    """ended: the hosts whose command ended by itself, in order; the others were stopped."""
    hints = {n: "; ".join(dict.fromkeys(
        ln[len(HINT):].strip()[-160:] for ln in d.stdout.splitlines() if ln.startswith(HINT)))
        for n, d in results.items()}
    hints = {n: h for n, h in hints.items() if h}
    progress = dict(watch.progress)
    for n, d in results.items():  # what a host printed as its command ended is the latest
        final = P.parse_status(d.stdout)
        if final is not None:
            progress[n] = final
    nproc = {m.name: m.nproc for m in members}
    lost = [n for n, d in results.items() if finished_anyway(d, progress.get(n), nproc[n])]
    results = {n: replace(d, exit=0) if n in lost else d for n, d in results.items()}
    for n in lost:  # ended well; said so beside its hints
        hints[n] = "; ".join(filter(None, [hints.get(n), "its ranks finished; the SSH "
                                           "connection went before the exit status came"]))
    r0 = P.rank0(progress)
    if r0 is not None and r0.world:
        ranks = r0.world
    planned = backend
    backend = (r0.backend if r0 is not None and r0.backend else backend)
    base = AllReduce(backend, names, ranks, logs=hints, wall_s=wall, launch_s=watch.launch_s,
                     progress={n: P.summary(progress.get(n), nproc[n]) for n in names},
                     expected=planned)
    failed_first = [n for n in ended if not results[n].ok and results[n].exit != 124]
    stopped = [n for n in names if n not in ended]
    kind = watch.kind
    if kind == "ended" and any(not d.ok for d in results.values()):
        kind = "timeout"  # the hosts' own `timeout` ended it: the controller never decided
    if failed_first and kind in ("failed", "ended", "timeout"):
        # The first rank to fail is the culprit; the others failed or were stopped after it.
        culprit = failed_first[0]
        return replace(base, error=(
            f"the rank on {culprit} failed first" + (
                f"; stopped the launcher on {', '.join(stopped)}" if stopped else "")),
            failed={n: log_reason(results[n]) for n in failed_first}, outcome="failed")
    if kind == "out-of-time":
        joined = sum(1 for n, p in progress.items() if p is not None
                     and p.stage(nproc[n]) == P.JOINED)
        return replace(base, error=(
            f"ran out of its {opts.timeout:.0f} s time limit while the ranks still progressed "
            f"({joined} of {len(names)} hosts had joined the rendezvous, the last "
            f"progress {watch.idle_s or 0:.0f} s before): nothing to blame on the cluster; "
            "give it more time with --allreduce-timeout"), outcome="out-of-time")
    if kind == "never-joined":
        waited = [n for n in names if n not in watch.named]
        return replace(base, error=(
            f"{', '.join(watch.named)} never joined the rendezvous: nothing progressed for "
            f"{watch.idle_s or 0:.0f} s ({watch.deadline_s:.0f} s after the launch); "
            f"{', '.join(waited)} waited for it: stopped"),
            failed={n: f"never joined the rendezvous: {why}" + log_of(results.get(n))
                    for n, why in watch.named.items()}, outcome="never-joined")
    if kind == "stalled":
        return replace(base, error=(
            f"{', '.join(watch.named)} stopped progressing; the others waited for it: "
            "stopped"), failed=dict(watch.named), outcome="stalled",
            sizes=_sizes(r0, ranks))
    if kind == "slow":
        done_ops = max((p.ops for p in progress.values() if p is not None), default=0)
        return replace(base, sizes=_sizes(r0, ranks), outcome="slow", cut=(
            f"cut at its {watch.deadline_s:.0f} s deadline while collectives still completed "
            f"({done_ops} done, the last {watch.idle_s or 0:.0f} s before): slower than the "
            "measured links predict"))
    if kind in ("stall", "timeout"):
        at = f"{watch.deadline_s:.0f} s" if watch.deadline_s else f"{opts.timeout:.0f} s"
        idle = ("no progress" if watch.idle_s is None else
                f"no collective completed in the last {watch.idle_s:.0f} s" if _joined_all(
                    watch, nproc) else
                f"no rank progressed towards the rendezvous for {watch.idle_s:.0f} s")
        return replace(base, error=(
            f"stalled at its {at} deadline: {idle}, and no rank stopped or fell behind the "
            "others: nothing to blame on one host (a path between hosts, a firewall, the "
            "interface the ranks bound to?)"), outcome="stall", sizes=_sizes(r0, ranks))
    sizes = _sizes(r0, ranks)
    if not sizes:
        return replace(base, error="every rank exited 0 but rank 0 reported no result",
                       outcome="failed")
    return replace(base, sizes=sizes)


def _joined_all(watch: Watch, nproc: Mapping[str, int]) -> bool:
    """Whether every rank had joined: the stall was in the collectives, not the launch."""
    return watch.launch_s is not None or P.all_joined(watch.progress, nproc)
