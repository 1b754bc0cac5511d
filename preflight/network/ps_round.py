"""A PS round: a short, bounded, real parameter-server job on the plan's own servers and
trainers, through the commands the plan emits (Paddle's launcher with the plan's --servers
and --trainers, in the job's container where it runs in one) -> PsRound (no judging here;
checks/ps_round.py judges).

The job (hostside/ps_round.py) trains a synthetic model, a sparse embedding sharded over the
servers and a small dense part, for a set time in async or GEO mode. Each trainer writes its
steps; each server samples its own CPU time, its cgroup's throttling and the host's bytes
while it serves. Every host's command prints those files as it ends; a host that fails prints
its logs' tail. The whole round is bounded: the hosts' own `timeout` under the controller's."""

from __future__ import annotations

import functools
import json
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Optional

from preflight.common.remote import Done, in_parallel
from preflight.model.measure import PsRound, PsServer, PsTrainer
from preflight.model.plan import Node, Plan
from preflight.model.policy import PsMode
from preflight.network.allreduce_log import log_reason
from preflight.network.paddle_job import (
    HOST_EXTRA_S,
    LOG,
    Member,
    launch_script,
    member_cleanup,
    member_stop,
    on_all,
    run_dirs,
)

PS_LINE = "PREFLIGHT-PS "
LOG_LINES = 20
@dataclass(frozen=True)
class PsRoundOptions:
    seconds: float = 5.0  # each trainer trains this long
    rows: int = 100_000  # the sparse embedding's rows, sharded over the servers
    dim: int = 16
    batch: int = 64
    mode: PsMode = "async"
    timeout: float = 180.0  # launchers started -> every host done (imports, servers, stop)


def round_command(m: Member, node: Node, run_dir: str, opts: PsRoundOptions) -> str:
    """The one command run on a host of the plan: its launcher command line as the plan
    has it (with the variables no flag carries), the round's script and its sizes."""
    q = shlex.quote
    d = q(run_dir)
    env = [f"{k}={v}" for k, v in node.flag_env()]
    launch = [*node.argv, "--job_id", "preflight-ps", "--log_dir", f"{run_dir}/log",
              f"{run_dir}/ps_round.py", "--seconds", f"{opts.seconds:g}", "--rows",
              str(opts.rows), "--dim", str(opts.dim), "--batch", str(opts.batch), "--mode",
              opts.mode, "--dir", run_dir]  # last: see paddle_job.stop_pattern
    after = [
        f"for f in {d}/ps-*.json; do [ -f \"$f\" ] && echo \"{PS_LINE}$(cat \"$f\")\"; done",
        f"if [ $rc -ne 0 ]; then for f in {d}/log/serverlog.* {d}/log/workerlog.* "
        f"{d}/launch.log; do [ -f \"$f\" ] && tail -n {LOG_LINES} \"$f\" "
        f"| sed \"s|^|{LOG}|\"; done; fi",
    ]
    return launch_script(m, run_dir, ["env", *env, *launch],
                         ("ps_round", "ps_round.py"), opts.timeout, after)


def run_ps_round(plan: Plan, members: Mapping[str, Member],
                 opts: PsRoundOptions) -> PsRound:
    """Runs the round on every node of the plan; returns what its trainers and servers did,
    or which hosts kept it from finishing and why."""
    started = time.monotonic()
    nodes = [n for n in plan.nodes if n.host in members]
    hosts = tuple(n.host for n in nodes)
    ms = [members[n.host] for n in nodes]
    dirs = run_dirs(ms, "ps")
    results: dict[str, Done] = {}
    lock = threading.Lock()
    limit = opts.timeout + HOST_EXTRA_S + 15

    def one(node: Node) -> None:
        m = members[node.host]
        try:
            done = m.remote.run(round_command(m, node, dirs[m.name], opts), timeout=limit)
        except Exception as e:
            done = Done(-1, "", f"{type(e).__name__}: {e}")
        with lock:
            results[m.name] = done

    try:
        in_parallel([functools.partial(one, n) for n in nodes], limit + 5, "ps-round")
    except KeyboardInterrupt:
        on_all(ms, {h: member_stop(members[h], dirs[h]) for h in hosts})
        raise
    finally:
        on_all(ms, {h: member_cleanup(members[h], dirs[h]) for h in hosts})
    with lock:
        results = dict(results)
    return replace(summarise(hosts, results, opts, time.monotonic() - started),
                   roles=plan.roles(), addresses={n.host: n.address for n in nodes})


def summarise(hosts: tuple[str, ...], results: Mapping[str, Done], opts: PsRoundOptions,
              wall: float) -> PsRound:
    """The round from what each host printed."""
    trainers: list[PsTrainer] = []
    servers: list[PsServer] = []
    failed: dict[str, str] = {}
    for host in hosts:
        done = results.get(host)
        if done is None:
            failed[host] = f"no answer within {opts.timeout + HOST_EXTRA_S:.0f} s"
            continue
        for doc in _docs(done.stdout):
            if doc.get("role") == "trainer":
                trainers.append(_trainer(host, doc))
            elif doc.get("role") == "server":
                server = _server(host, doc)
                if server is not None:
                    servers.append(server)
        if not done.ok:
            failed[host] = log_reason(done)
    error = None
    if failed:
        first = next(iter(failed))
        error = f"the job failed on {first}" + (
            f" and {len(failed) - 1} more host(s)" if len(failed) > 1 else "")
    return PsRound(hosts, opts.mode, trainers=tuple(sorted(trainers, key=lambda t: t.index)),
                   servers=tuple(servers), error=error, failed=failed, wall_s=wall,
                   seconds=opts.seconds)


def _docs(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        if line.startswith(PS_LINE):
            try:
                doc = json.loads(line[len(PS_LINE):])
            except ValueError:
                continue  # a file cut mid-write: the round's figures, not the host's fault
            if isinstance(doc, dict):
                out.append(doc)
    return out


def _trainer(host: str, d: Mapping[str, Any]) -> PsTrainer:
    median, wait, boxed = d.get("median_s"), d.get("wait_s"), d.get("in_container")
    return PsTrainer(host, int(d.get("index") or 0), int(d.get("steps") or 0),
                     float(d.get("seconds") or 0.0),
                     float(median) if isinstance(median, (int, float)) else None,
                     float(wait) if isinstance(wait, (int, float)) else None,
                     boxed if isinstance(boxed, bool) else None)


def _server(host: str, d: Mapping[str, Any]) -> Optional[PsServer]:
    first, last = d.get("first"), d.get("last")
    if not isinstance(first, dict) or not isinstance(last, dict):
        return None

    def delta(key: str) -> Optional[float]:
        a, b = first.get(key), last.get(key)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return float(b) - float(a)
        return None

    nr, took, rx, tx = (delta(k) for k in ("throttled", "throttled_s", "rx_bytes", "tx_bytes"))
    return PsServer(host, int(d.get("pid") or 0), delta("at") or 0.0, delta("cpu_s") or 0.0,
                    None if nr is None else int(nr), took,
                    None if rx is None else int(rx), None if tx is None else int(tx))
