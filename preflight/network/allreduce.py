"""Runs a short all-reduce across hosts with Paddle's own launcher -> AllReduce (no judging).

Every host gets one command: unpack the benchmark into a fresh private directory, run
`python -m paddle.distributed.launch` under the host's `timeout`, print the results and, on
failure, the log's tail. A rank that fails or hangs stops the run: after a short grace the
launcher's processes are killed on every host, found by the run's unique directory name."""

from __future__ import annotations

import base64
import functools
import json
import re
import secrets
import shlex
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Optional

from preflight.collect.remote import Done, Remote, in_parallel
from preflight.model.measure import AllReduce, SizeResult

RESULT, LOG, HINT = "PREFLIGHT-RESULT ", "PREFLIGHT-LOG ", "PREFLIGHT-HINT "
GRACE_S = 5.0  # after one rank fails, how long the others get to report their own failure
LOG_LINES = 40
# Lines of a failing rank's log that say why; the last one found is quoted in the finding.
_WHY = re.compile(r"(Error|Exception|error:|refused|timed out|Timeout|Killed|Abort|"
                  r"No such|not found|cannot|failed)", re.IGNORECASE)
_SECRET = re.compile(r"(?i)\b(\w*(?:passw|secret|token|api_?key|credential)\w*)=\S+")


@dataclass(frozen=True)
class AllReduceOptions:
    port: int = 36000  # the launcher's master; gloo gets port+1, the ranks port+2..port+2+nproc
    sizes_mib: tuple[float, ...] = (1.0, 8.0, 32.0)
    iters: int = 5
    timeout: float = 120.0  # per host, launcher start to results: the cap of the budget's
    budget_s: float = 30.0  # what the collectives may take, predicted from the slowest link


@dataclass(frozen=True)
class Member:
    """A host taking part: how to reach it and how to launch on it."""

    name: str
    remote: Remote
    python: str
    ip: str  # the address the launcher advertises (--host)
    nproc: int = 1
    gloo_ifname: Optional[str] = None  # set when the host's own environment does not


@functools.lru_cache(maxsize=1)
def _packed_script() -> str:
    src = resources.files("preflight.network").joinpath("allreduce_script.py").read_bytes()
    return base64.b64encode(zlib.compress(src, 9)).decode()


_UNPACK = ("import base64,sys,zlib;open(sys.argv[1],'wb').write("
           "zlib.decompress(base64.b64decode(sys.argv[2])))")


def host_command(m: Member, rank: int, members: Sequence[Member], opts: AllReduceOptions,
                 run_dir: str) -> str:
    """Returns the one command run on a host; every value is quoted."""
    q = shlex.quote
    master = f"{members[0].ip}:{opts.port}"
    env = ["NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET",  # which transport NCCL chose
           # With --master the launcher takes its rank ports (and rank 0's store) at random
           # from PORT_RANGE, not from --start_port: keep them in the range checked free.
           f"PORT_RANGE={opts.port + 2}:{opts.port + 2 + m.nproc}"]
    if m.gloo_ifname:
        env.append(f"GLOO_SOCKET_IFNAME={m.gloo_ifname}")
    launch = [m.python, "-m", "paddle.distributed.launch", "--master", master,
              "--nnodes", str(len(members)), "--rank", str(rank),
              "--nproc_per_node", str(m.nproc), "--host", m.ip, "--max_restart", "0",
              "--gloo_port", str(opts.port + 1),
              "--job_id", "preflight", "--log_dir", f"{run_dir}/log",
              f"{run_dir}/allreduce.py", "--sizes", ",".join(f"{s:g}" for s in opts.sizes_mib),
              "--iters", str(opts.iters), "--out", f"{run_dir}/result"]
    run = " ".join(q(a) for a in ["env", *env, *launch])
    d = q(run_dir)
    script = "\n".join([
        f"mkdir -m 700 {d} || exit 96",
        f"cd {d} || exit 96",
        f"{q(m.python)} -c {q(_UNPACK)} {d}/allreduce.py {_packed_script()} || exit 95",
        f"if command -v timeout >/dev/null 2>&1; then timeout -k 3 {int(opts.timeout)} {run} "
        f"> {d}/launch.log 2>&1; else {run} > {d}/launch.log 2>&1; fi",
        "rc=$?",
        f"for f in {d}/result.*; do [ -f \"$f\" ] && {{ printf %s {q(RESULT)}; cat \"$f\"; "
        "echo; }; done",
        f"grep -h -E 'NET/(IB|Socket|Plugin)|via NET' {d}/log/workerlog.* 2>/dev/null "
        f"| head -n 8 | sed 's/^/{HINT}/'",
        f"if [ $rc -ne 0 ]; then tail -q -n {LOG_LINES} {d}/log/workerlog.0 {d}/launch.log "
        f"2>/dev/null | sed 's/^/{LOG}/'; fi",
        "exit $rc",
    ])
    return "sh -c " + q(script)


def kill_pattern(run_dir: str) -> str:
    """Returns a pkill pattern for the run's processes that the killing shell itself lacks:
    `[.]` matches the dot of the directory name but not the pattern's own text."""
    return "[.]" + run_dir.rsplit("/.", 1)[1] + "/"


def stop_command(run_dir: str) -> str:
    pat = shlex.quote(kill_pattern(run_dir))
    return (f"sh -c {shlex.quote(f'pkill -TERM -f {pat}; sleep 1; pkill -KILL -f {pat}; true')}")


def cleanup_command(run_dir: str) -> str:
    pat = shlex.quote(kill_pattern(run_dir))
    return "sh -c " + shlex.quote(f"pkill -KILL -f {pat}; rm -rf {shlex.quote(run_dir)}; true")


def redact(line: str) -> str:
    return _SECRET.sub(lambda m: m.group(1) + "=***", line)


def log_reason(done: Done) -> str:
    """Returns the line of a failing rank's log that says why (redacted), or its exit."""
    lines = [redact(ln[len(LOG):].strip()) for ln in done.stdout.splitlines()
             if ln.startswith(LOG) and ln[len(LOG):].strip()]
    lines = [ln for ln in lines if not ln.startswith("LAUNCH INFO")]
    why = [ln for ln in lines if _WHY.search(ln)]
    text = (why or lines or [done.tail()])[-1][:300]
    if done.exit == 96:
        text = "could not create the run directory in /tmp"
    elif done.exit == 95:
        text = f"could not unpack the benchmark with the host's python: {done.tail()}"
    elif done.exit == 124:
        text = f"did not finish within the time limit; log: {text}"
    return text


def parse_results(done: Done) -> list[dict[str, Any]]:
    docs = []
    for ln in done.stdout.splitlines():
        if ln.startswith(RESULT):
            try:
                doc = json.loads(ln[len(RESULT):])
            except ValueError:
                continue
            if isinstance(doc, dict):
                docs.append(doc)
    return docs


def sizes_from(doc: Mapping[str, Any], ranks: int) -> tuple[SizeResult, ...]:
    out = []
    for s in doc.get("sizes", []):
        if isinstance(s, dict) and isinstance(s.get("bytes"), int) \
                and isinstance(s.get("seconds"), (int, float)) and s["seconds"] > 0:
            out.append(SizeResult(s["bytes"], float(s["seconds"]), ranks))
    return tuple(out)


def run_allreduce(members: Sequence[Member], backend: str, opts: AllReduceOptions,
                  ) -> AllReduce:
    """Returns the all-reduce's figures, or which hosts failed and what their logs said."""
    started = time.monotonic()
    run_dir = f"/tmp/.preflight-ar-{secrets.token_hex(8)}"
    ranks = sum(m.nproc for m in members)
    names = tuple(m.name for m in members)
    results: dict[str, Done] = {}
    order: list[str] = []  # hosts in the order their command ended
    lock = threading.Lock()

    def one(rank: int, m: Member) -> None:
        try:
            done = m.remote.run(host_command(m, rank, members, opts, run_dir),
                                timeout=opts.timeout + 15)
        except Exception as e:
            done = Done(-1, "", f"{type(e).__name__}: {e}")
        with lock:
            results[m.name] = done
            order.append(m.name)

    threads = [threading.Thread(target=one, args=(i, m), daemon=True, name=f"ar-{m.name}")
               for i, m in enumerate(members)]
    try:
        for t in threads:
            t.start()
        first_failure = _wait(threads, results, lock, opts.timeout + 20)
        with lock:
            ended = list(order)  # what ended by itself; the rest is stopped below
        if first_failure is not None or len(ended) < len(members):
            _stop_all(members, run_dir)
            end = time.monotonic() + 8.0  # the stopped commands still print their logs
            for t in threads:
                t.join(max(0.0, end - time.monotonic()))
    finally:
        _cleanup(members, run_dir)
    wall = time.monotonic() - started
    with lock:
        results = dict(results)
    return _summarise(members, backend, ranks, names, results, ended, opts, wall)


def _wait(threads: Sequence[threading.Thread], results: Mapping[str, Done],
          lock: threading.Lock, limit: float) -> Optional[float]:
    """Waits for every host or the deadline; returns when the first failure was seen, after
    the grace that lets the other ranks report their own failure."""
    end = time.monotonic() + limit
    failed_at: Optional[float] = None
    while time.monotonic() < end and any(t.is_alive() for t in threads):
        with lock:
            failed = any(not d.ok for d in results.values())
        if failed and failed_at is None:
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > GRACE_S:
            break
        time.sleep(0.05)
    return failed_at


def _on_all(members: Sequence[Member], command: str) -> None:
    in_parallel([functools.partial(_quiet_run, m.remote, command) for m in members], 10.0,
                "ar-stop")


def _quiet_run(remote: Remote, command: str) -> None:
    try:
        remote.run(command, timeout=8.0)
    except Exception:
        pass  # a host that is gone has nothing left to stop


def _stop_all(members: Sequence[Member], run_dir: str) -> None:
    _on_all(members, stop_command(run_dir))


def _cleanup(members: Sequence[Member], run_dir: str) -> None:
    _on_all(members, cleanup_command(run_dir))


def _summarise(members: Sequence[Member], backend: str, ranks: int, names: tuple[str, ...],
               results: Mapping[str, Done], ended: Sequence[str], opts: AllReduceOptions,
               wall: float) -> AllReduce:
    """ended: the hosts whose command ended by itself, in order; the others were stopped."""
    hints = {n: "; ".join(dict.fromkeys(
        ln[len(HINT):].strip()[-160:] for ln in d.stdout.splitlines() if ln.startswith(HINT)))
        for n, d in results.items()}
    hints = {n: h for n, h in hints.items() if h}
    # The host's `timeout` (exit 124) ends a hung rank: that is a hang, not a failure of it.
    failed_first = [n for n in ended if not results[n].ok and results[n].exit != 124]
    hung = [m.name for m in members if m.name not in ended or results[m.name].exit == 124]
    if failed_first:
        # The first rank to fail is the culprit; the others failed or were stopped after it.
        culprit = failed_first[0]
        failed = {n: log_reason(results[n]) for n in failed_first}
        return AllReduce(backend, names, ranks, error=(
            f"the rank on {culprit} failed first" + (
                f"; stopped the launcher on {', '.join(hung)}" if hung else "")),
            failed=failed, logs=hints, wall_s=wall)
    if hung:
        why = {n: log_reason(results[n]) if n in results else "no answer" for n in hung}
        return AllReduce(backend, names, ranks, error=(
            f"no result within {opts.timeout:.0f} s from {', '.join(hung)}: stopped"),
            failed={n: f"hung; its log last said: {w}" for n, w in why.items()},
            logs=hints, wall_s=wall)
    docs = [doc for d in results.values() for doc in parse_results(d)]
    rank0 = next((doc for doc in docs if doc.get("rank") == 0), None)
    if rank0 is None:
        return AllReduce(backend, names, ranks, error="every rank exited 0 but rank 0 "
                         "wrote no result", logs=hints, wall_s=wall)
    world = rank0.get("world")
    if isinstance(world, int) and world > 0:
        ranks = world
    return AllReduce(str(rank0.get("backend") or backend), names, ranks,
                     sizes=sizes_from(rank0, ranks), logs=hints, wall_s=wall)
