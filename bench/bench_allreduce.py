"""Benchmark (not a test): the all-reduce stage's wall time against its budget, on simulated
hosts with Paddle, healthy and with one slow link, measured side by side on one cluster.

    sudo .venv/bin/python bench/bench_allreduce.py [--hosts 8] [--rate 200mbit]
        [--slow-rate 20mbit] [--budget 30] [--out bench-allreduce.json]

Each case is one real `preflight check` with the active tests: healthy (every link at
--rate), one slow host (its link at --slow-rate; NO-GO naming it), and the same cluster with
a job sized to the others (--nnodes hosts-1: GO, the slow host left out with its cost).
Reported per case: the all-reduce's wall time (launch included) and the budget, the time
predicted from the links, the ranks, the sizes run and dropped, the verdict."""

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
    """Runs one check with the active tests; returns the figures of its all-reduce stage."""
    report = os.path.join(tb.base, f"bench-{time.monotonic_ns()}.json")
    start = time.monotonic()
    p = subprocess.run(tb.client_cmd([sys.executable, "-m", "preflight", "check", "-i",
                                      inventory, "--no-progress", "--iperf-seconds", "1",
                                      "--json", report, *extra]),
                       capture_output=True, text=True, timeout=1800, cwd=tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    wall = time.monotonic() - start
    with open(report) as fh:
        doc = json.load(fh)
    net = doc["network"]
    ar = net["allreduce"] or {}
    costs = (doc.get("plan") or {}).get("costs") or {}
    return {"rc": p.returncode, "verdict": doc["verdict"], "run_s": round(wall, 1),
            "network_s": net["wall_s"], "allreduce_s": ar.get("wall_s"),
            "launch_s": ar.get("launch_s"), "outcome": ar.get("outcome"),
            "budget_s": ar.get("budget_s"), "predicted_s": ar.get("predicted_s"),
            "ranks": ar.get("ranks"), "left_out": sorted(net.get("allreduce_left_out") or {}),
            "sizes_mib": [s["bytes"] >> 20 for s in ar.get("sizes") or []],
            "dropped": ar.get("dropped"), "error": ar.get("error"),
            "busbw_gbytes": [round(s["busbw_bytes_s"] / 1e9, 4) for s in ar.get("sizes") or []],
            "costs": costs}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--slow-rate", default="20mbit")
    ap.add_argument("--budget", default="30")
    ap.add_argument("--out", default="bench-allreduce.json")
    args = ap.parse_args()
    python = testbed.paddle_python("3.3.1")
    cases: dict[str, dict[str, Any]] = {}
    with testbed.Testbed(args.hosts) as tb:
        names = list(tb.hosts)
        for name in names:
            tb.throttle(name, args.rate)
        inv = tb.inventory(os.path.join(tb.base, "bench.yaml"), python=python)
        budget = ("--allreduce-budget", args.budget)
        cases["healthy"] = check(tb, inv, *budget)
        slow = names[-1]
        tb.unthrottle(slow)
        tb.throttle(slow, args.slow_rate)
        cases["one slow host"] = check(tb, inv, *budget)
        cases["sized to the others"] = check(tb, inv, *budget, "--nnodes",
                                             str(args.hosts - 1))
    for name, c in cases.items():
        print(f"{name}: {json.dumps(c)}")
    print(f"\n{'case':<22} {'verdict':>7} {'ranks':>5} {'all-reduce s':>12} {'launch s':>8} "
          f"{'budget':>6} {'predicted':>9} {'sizes MiB':>10}  dropped / cost")
    for name, c in cases.items():
        extra = "; ".join(c["dropped"] or []) or "; ".join(
            f"{h}: {v['factor']}x" for h, v in c["costs"].items())
        print(f"{name:<22} {c['verdict']:>7} {c['ranks'] or '-':>5} "
              f"{c['allreduce_s'] or '-':>12} {c['launch_s'] or '-':>8} {c['budget_s'] or '-':>6} "
              f"{c['predicted_s'] or '-':>9} {','.join(map(str, c['sizes_mib'])):>10}  {extra}")
    with open(args.out, "w") as fh:
        json.dump({"hosts": args.hosts, "rate": args.rate, "slow_rate": args.slow_rate,
                   "budget_s": float(args.budget), "cases": cases}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
