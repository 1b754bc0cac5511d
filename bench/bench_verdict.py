"""Benchmark (not a test): the time to a full verdict of a healthy simulated cluster, with every
network test (iperf3 and the all-reduce with Paddle), at several cluster sizes.

    sudo .venv/bin/python bench/bench_verdict.py [--sizes 8,16,32,64] [--rate 1gbit]
        [--out bench-verdict.json]

Each size is a fresh simulated cluster whose links are all shaped to --rate, checked once by a
real `preflight check` (its default network tests, as a user runs it). Reported per size: the
verdict and exit code, the whole run's wall time, the network stage's and the all-reduce's, the
time every rank took to join, the slowest Paddle import the probe measured, and the all-reduce's
outcome and error when it had one. Every size should be GO."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from preflight.testing import testbed


def check(tb: testbed.Testbed, inventory: str, *extra: str) -> dict[str, Any]:
    """Runs one full check; returns its verdict and the figures of its stages."""
    report = os.path.join(tb.base, f"bench-{time.monotonic_ns()}.json")
    start = time.monotonic()
    p = subprocess.run(tb.client_cmd([sys.executable, "-m", "preflight", "check", "-i",
                                      inventory, "--no-progress", "--json", report, *extra]),
                       capture_output=True, text=True, timeout=3000, cwd=tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    wall = time.monotonic() - start
    if not os.path.exists(report):
        return {"rc": p.returncode, "run_s": round(wall, 1), "stderr": p.stderr[-2000:]}
    with open(report) as fh:
        doc = json.load(fh)
    net = doc.get("network") or {}
    ar = net.get("allreduce") or {}
    imports: list[float] = [
        s for h in doc["hosts"].values()
        for s in [((h.get("facts") or {}).get("paddle") or {}).get("import_s")]
        if isinstance(s, (int, float))]
    blocking = [f"{f['check']} {f.get('host') or ''}: {f['message'][:200]}"
                for f in doc.get("findings", []) if f["status"] in ("fail", "error")]
    return {"rc": p.returncode, "verdict": doc["verdict"], "run_s": round(wall, 1),
            "network_s": net.get("wall_s"), "allreduce_s": ar.get("wall_s"),
            "launch_s": ar.get("launch_s"),
            "import_s_max": max(imports, default=None),
            "outcome": ar.get("outcome"), "ranks": ar.get("ranks"), "error": ar.get("error"),
            "blocking": blocking[:10]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,16,32,64")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--out", default="bench-verdict.json")
    args = ap.parse_args()
    python = testbed.paddle_python("3.3.1")
    results: dict[str, dict[str, Any]] = {}
    for n in [int(s) for s in args.sizes.split(",")]:
        with testbed.Testbed(n) as tb:
            for name in tb.hosts:
                tb.throttle(name, args.rate)
            inv = tb.inventory(os.path.join(tb.base, "bench.yaml"), python=python)
            results[str(n)] = r = check(tb, inv)
        print(f"{n} hosts: {json.dumps(r)}", flush=True)
    print(f"\n{'hosts':>5} {'verdict':>7} {'run s':>6} {'network s':>9} {'all-reduce s':>12} "
          f"{'joined s':>8} {'import s':>8}  outcome")
    for size, r in results.items():
        print(f"{size:>5} {r.get('verdict', '-'):>7} {r['run_s']:>6} "
              f"{r.get('network_s') or '-':>9} "
              f"{r.get('allreduce_s') or '-':>12} {r.get('launch_s') or '-':>8} "
              f"{r.get('import_s_max') or '-':>8}"
              f"  {r.get('outcome') or '-'} {r.get('error') or ''}")
    with open(args.out, "w") as fh:
        json.dump({"rate": args.rate, "sizes": results}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
