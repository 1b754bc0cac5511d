"""Benchmark (on demand, not a test): what the controller spends per host, so that the
fan-out can be extrapolated past what one machine can simulate.

    sudo .venv/bin/python bench/bench_scaling.py [--sizes 8,16,32,64] [--reps 3]
        [--out bench-scaling.json]

For each size, in a fresh child process in the testbed's client namespace: collect the
facts of that many simulated hosts (forks = hosts, no Paddle, connections kept open as the
network tests keep them), then read, with every connection still open, the process's open
file descriptors, threads and resident memory, and its CPU time for the collection. The
per-host figures are the slopes of a least-squares line over the sizes; the intercept is
what a run costs whatever its size."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from preflight.testing import testbed

CHILD = "--child"


def child(inventory: str) -> int:
    """Runs one collection and prints its figures as JSON (runs in the client namespace)."""
    from preflight.collect.fanout import PROBE
    from preflight.common.hostjob import CollectOptions, fan_out
    from preflight.inventory import load
    from preflight.transport.ssh.job import SshJob

    hosts = load(inventory)
    base = _state()
    opts = CollectOptions(forks=len(hosts), paddle=False, keep_connections=True)
    connections: dict[str, Any] = {}
    t0 = time.perf_counter()
    outcomes = fan_out(hosts, opts, SshJob, PROBE, connections=connections)
    wall = time.perf_counter() - t0
    after = _state()
    for conn in connections.values():
        conn.close()
    print(json.dumps({
        "hosts": len(hosts), "answered": sum(1 for o in outcomes if o.ok),
        "open_connections": len(connections), "wall_s": wall,
        "cpu_s": after["cpu_s"] - base["cpu_s"], "fds": after["fds"] - base["fds"],
        "threads": after["threads"] - base["threads"],
        "rss_mib": (after["rss_kib"] - base["rss_kib"]) / 1024}))
    return 0


def _state() -> dict[str, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    status = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            status[key] = value.split()
    return {"cpu_s": r.ru_utime + r.ru_stime, "fds": len(os.listdir("/proc/self/fd")),
            "threads": int(status["Threads"][0]), "rss_kib": int(status["VmRSS"][0])}


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    k = sum((x - mx) * (y - my) for x, y in points) / sxx
    return k, my - k * mx


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == CHILD:
        return child(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,16,32,64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="bench-scaling.json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    with testbed.Testbed(max(sizes)) as tb:
        names = list(tb.hosts)
        for _ in range(args.reps):
            for n in sizes:
                inv = tb.inventory(os.path.join(tb.base, f"scaling-{n}.yaml"), names[:n])
                p = subprocess.run(tb.client_cmd([sys.executable, __file__, CHILD, inv]),
                                   capture_output=True, text=True, timeout=300,
                                   env=dict(os.environ, PYTHONSAFEPATH="1"))
                if p.returncode != 0:
                    print(p.stderr[-2000:], file=sys.stderr)
                    return 1
                rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), flush=True)
    fits = {}
    for key in ("cpu_s", "fds", "threads", "rss_mib", "wall_s"):
        k, c = slope([(r["hosts"], r[key]) for r in rows])
        fits[key] = {"per_host": k, "fixed": c}
        print(f"{key:>8}: {k:.4f} per host + {c:.3f}")
    with open(args.out, "w") as fh:
        json.dump({"sizes": sizes, "reps": args.reps, "rows": rows, "fits": fits,
                   "machine": {"cpus": os.cpu_count()}}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
