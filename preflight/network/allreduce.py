"""Runs a short all-reduce across hosts with Paddle's own launcher -> AllReduce (no judging).

Every host gets one command (allreduce_cmd, a Paddle job of paddle_job): the benchmark
written into a fresh private directory, `python -m paddle.distributed.launch` run under the
host's `timeout`, then the ranks' progress printed and, on failure, the log's tail. While it
runs the controller polls each host's progress (network/progress.py) and decides from what the
ranks did, not from a guess (allreduce_watch): the launch goes on while it progresses and is
cut when nothing progressed for its idle window, sized from how long the probe saw Paddle's
import take; then the collectives get the time the budget predicted, counted from the
measured join. On stopping, the launcher's processes are stopped and removed on every host;
allreduce_outcome says what came of it."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.common.remote import Done, in_parallel
from preflight.model.measure import AllReduce, Backend
from preflight.network import progress as P
from preflight.network.allreduce_cmd import AllReduceOptions, host_command, status_command
from preflight.network.allreduce_outcome import summarise
from preflight.network.allreduce_watch import (
    OnProgress,
    Watch,
    decide,
    finished_anyway,
    progress_of,
)
from preflight.network.paddle_job import (
    HOST_EXTRA_S,
    Member,
    member_cleanup,
    member_stop,
    on_all,
    run_dirs,
)

GRACE_S = 5.0  # after one rank fails, how long the others get to report their own failure


def run_allreduce(members: Sequence[Member], backend: Backend, opts: AllReduceOptions,
                  on_progress: Optional[OnProgress] = None) -> AllReduce:
    """Returns the all-reduce's figures, or which hosts kept it from finishing and why."""
    started = time.monotonic()
    dirs = run_dirs(members)
    ranks = sum(m.nproc for m in members)
    names = tuple(m.name for m in members)
    results: dict[str, Done] = {}
    order: list[str] = []  # hosts in the order their command ended
    lock = threading.Lock()

    def one(rank: int, m: Member) -> None:
        try:
            done = m.remote.run(host_command(m, rank, members, opts, dirs[m.name]),
                                timeout=opts.timeout + HOST_EXTRA_S + 15)
        except Exception as e:
            done = Done(-1, "", f"{type(e).__name__}: {e}")
        with lock:
            results[m.name] = done
            order.append(m.name)

    threads = [threading.Thread(target=one, args=(i, m), daemon=True, name=f"ar-{m.name}")
               for i, m in enumerate(members)]
    watch = Watch({m.name: None for m in members})
    try:
        for t in threads:
            t.start()
        _watch(members, threads, results, lock, opts, dirs, started, watch, on_progress)
        with lock:
            ended = list(order)  # what ended by itself; the rest is stopped below
        if watch.kind != "ended" or len(ended) < len(members):
            _stop_all(members, dirs)
            end = time.monotonic() + 8.0  # the stopped commands still print their logs
            for t in threads:
                t.join(max(0.0, end - time.monotonic()))
    finally:
        _cleanup(members, dirs)
    wall = time.monotonic() - started
    with lock:
        results = dict(results)
    return summarise(members, backend, ranks, names, results, ended, opts, wall, watch)


def _poll(members: Sequence[Member], dirs: Mapping[str, str], watch: Watch) -> None:
    """Reads every host's progress; a host that does not answer keeps its last status."""

    def one(m: Member) -> None:
        try:
            done = m.remote.run(status_command(m, dirs[m.name]), timeout=8.0)
        except Exception:
            return  # no news from it this time; its command's own end will tell
        status = P.parse_status(done.stdout)
        if status is not None:
            watch.progress[m.name] = status

    in_parallel([functools.partial(one, m) for m in members], 10.0, "ar-poll")


def _watch(members: Sequence[Member], threads: Sequence[threading.Thread],
           results: Mapping[str, Done], lock: threading.Lock, opts: AllReduceOptions,
           dirs: Mapping[str, str], started: float, watch: Watch,
           on_progress: Optional[OnProgress] = None) -> None:
    """Waits for every host's command, polling progress, until the run ends by itself or
    one of its deadlines decides how it stopped (watch.kind)."""
    nproc = {m.name: m.nproc for m in members}
    hard = started + opts.timeout + HOST_EXTRA_S + 20
    joined_at: Optional[float] = None
    failed_at: Optional[float] = None
    next_poll = started + min(opts.poll_s, 1.0)
    while time.monotonic() < hard and any(t.is_alive() for t in threads):
        now = time.monotonic()
        with lock:
            # The host's `timeout` (exit 124) ending a launcher is a deadline, not a failure.
            failed = any(not d.ok and d.exit != 124 and not finished_anyway(
                d, watch.progress.get(n), nproc[n]) for n, d in results.items())
        if failed:
            failed_at = now if failed_at is None else failed_at
            if now - failed_at > GRACE_S:
                watch.kind = "failed"
                return
        elif now >= next_poll:
            _poll(members, dirs, watch)
            if on_progress:
                on_progress(*progress_of(watch.progress, nproc, len(opts.sizes_mib)))
            now = time.monotonic()
            next_poll = now + opts.poll_s
            watch.moved(nproc, now - started)
            if decide(watch, nproc, opts, now - started, joined_at):
                return
            if joined_at is None and P.all_joined(watch.progress, nproc):
                joined_at = now - started
                watch.launch_s = joined_at
        time.sleep(0.05)
    if any(t.is_alive() for t in threads):
        watch.kind = "timeout"


def _stop_all(members: Sequence[Member], dirs: Mapping[str, str]) -> None:
    on_all(members, {m.name: member_stop(m, dirs[m.name]) for m in members})


def _cleanup(members: Sequence[Member], dirs: Mapping[str, str]) -> None:
    on_all(members, {m.name: member_cleanup(m, dirs[m.name]) for m in members})
