"""Benchmark (not a test): wall time of the network tests on 8, 16 and 32 simulated hosts,
ring vs full matrix, measured side by side on the same cluster in one run.

    sudo .venv/bin/python bench/bench_network.py [--sizes 8,16,32] [--seconds 1]
        [--out bench-network.json]

Links are shaped (tc tbf, 200 Mbit/s by default) like NICs, so that 16 pairs at once stay
within what two CPUs can switch: at 1 Gbit/s, 8 or more concurrent pairs saturate the
software bridge, like an oversubscribed switch. Only the network phase is timed (the report's
network.wall_s); the probe runs with the system python (no Paddle import) to keep it short."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from preflight.testing import testbed


def network_wall(tb: testbed.Testbed, inventory: str, *extra: str,
                 ) -> tuple[float, int, int, int, int]:
    """Returns (network.wall_s, iperf3 rounds, survey runs, retests, bandwidth findings that
    did not pass) of one `preflight check` (exit 1: the bench's hosts have no Paddle)."""
    report = os.path.join(tb.base, f"bench-{time.monotonic_ns()}.json")
    subprocess.run(tb.client_cmd([sys.executable, "-m", "preflight", "check", "-i",
                                      inventory, "--no-progress", "--no-allreduce",
                                      "--json", report, *extra]),
                       capture_output=True, text=True, timeout=1800, cwd=tb.base,
                       env=dict(os.environ, PYTHONSAFEPATH="1"))
    with open(report) as fh:
        doc = json.load(fh)
    net = doc["network"]
    runs = sum(1 for x in net["links"] if x["phase"] == "survey")
    retests = sum(1 for x in net["links"] if x["phase"] == "retest")
    bad = sum(1 for f in doc["findings"] if f["check"] == "bandwidth" and f["status"] != "pass")
    return float(net["wall_s"]), int(net["rounds"]), runs, retests, bad


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,16,32")
    ap.add_argument("--seconds", default="1", help="iperf3 -t of each run")
    ap.add_argument("--rate", default="200mbit", help="tc tbf rate of every host's link")
    ap.add_argument("--out", default="bench-network.json")
    args = ap.parse_args()
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        t0 = time.monotonic()
        with testbed.Testbed(n) as tb:
            for name in tb.hosts:
                tb.throttle(name, args.rate)
            built = time.monotonic() - t0
            inv = tb.inventory(os.path.join(tb.base, "bench.yaml"), python="/usr/bin/python3")
            ring = network_wall(tb, inv, "--iperf-seconds", args.seconds)
            matrix = network_wall(tb, inv, "--iperf-seconds", args.seconds, "--network-matrix")
        rows.append({"hosts": n, "build_s": round(built, 1),
                     "ring_s": round(ring[0], 1), "ring_rounds": ring[1], "ring_runs": ring[2],
                     "ring_retests": ring[3], "ring_not_pass": ring[4],
                     "matrix_s": round(matrix[0], 1), "matrix_rounds": matrix[1],
                     "matrix_runs": matrix[2], "matrix_retests": matrix[3],
                     "matrix_not_pass": matrix[4],
                     "matrix_over_ring": round(matrix[0] / ring[0], 1)})
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'hosts':>5} {'ring s':>7} {'rounds':>6} {'runs':>5} {'retests':>7} "
          f"{'matrix s':>9} {'rounds':>6} {'runs':>5} {'retests':>7} {'ratio':>6}")
    for r in rows:
        print(f"{r['hosts']:>5} {r['ring_s']:>7} {r['ring_rounds']:>6} {r['ring_runs']:>5} "
              f"{r['ring_retests']:>7} {r['matrix_s']:>9} {r['matrix_rounds']:>6} "
              f"{r['matrix_runs']:>5} {r['matrix_retests']:>7} {r['matrix_over_ring']:>6}")
    with open(args.out, "w") as fh:
        json.dump({"seconds": args.seconds, "rate": args.rate, "rows": rows}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
