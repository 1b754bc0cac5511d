"""Benchmark (on demand, not a test): the fan-out through Slurm against the fan-out over SSH,
side by side in one run, at 8, 16 and 32 simulated nodes.

    sudo .venv/bin/python bench/bench_slurm.py [--sizes 8,16,32] [--reps 3]
        [--out bench/results/slurm-DATE.json]

One testbed with a real Slurm on it (tests/slurmrig.py). For each size and rep, in
alternation: `preflight check` of that many nodes over SSH (forks = nodes), then the same
with --transport slurm (sinfo, salloc --immediate, one srun step with the probe on stdin,
scancel), both without network tests and without Paddle's import, so what is timed is the
fan-out itself. Wall time of the whole command, median of the reps; the ratio of the two
medians is what this machine can say (2 cores: every node's probe shares them)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from preflight.testing import testbed

# The Slurm rig lives with the tests (it is not shipped).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import slurmrig as S  # noqa: E402


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    return time.perf_counter() - start, p.returncode, p.stdout[-400:] + p.stderr[-400:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,16,32")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="bench-slurm.json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    names = [f"node{i}" for i in range(1, max(sizes) + 1)]
    rows: list[dict[str, Any]] = []
    with testbed.Testbed(len(names), names=names) as tb:
        slurm = S.Slurm(tb)
        env = dict(slurm.env, PYTHONSAFEPATH="1")
        try:
            for rep in range(args.reps):
                for n in sizes:
                    inv = tb.inventory(os.path.join(tb.base, f"bench-{n}.yaml"), names[:n])
                    common = [sys.executable, "-m", "preflight", "check", "-i", inv,
                              "--no-network-tests", "--no-paddle", "--cpu-sample", "0.1",
                              "--forks", str(n), "--no-log", "-q"]
                    for transport in ("ssh", "slurm"):
                        wall, rc, tail = timed(tb.client_cmd(
                            [*common, "--transport", transport]), env)
                        if rc not in (0, 1):  # 1: a NO-GO, still a timed fan-out
                            print(f"{transport} {n}: exit {rc}: {tail}", file=sys.stderr)
                            return 1
                        rows.append({"rep": rep, "nodes": n, "transport": transport,
                                     "wall_s": round(wall, 3)})
                        print(json.dumps(rows[-1]), flush=True)
        finally:
            slurm.close()
    summary = []
    for n in sizes:
        med = {t: statistics.median(r["wall_s"] for r in rows
                                    if r["nodes"] == n and r["transport"] == t)
               for t in ("ssh", "slurm")}
        summary.append({"nodes": n, "ssh_s": med["ssh"], "slurm_s": med["slurm"],
                        "slurm_over_ssh": round(med["slurm"] / med["ssh"], 2)})
        print(f"{n:>3} nodes: ssh {med['ssh']:.2f} s, srun {med['slurm']:.2f} s "
              f"(srun/ssh {med['slurm'] / med['ssh']:.2f})")
    with open(args.out, "w") as fh:
        json.dump({"sizes": sizes, "reps": args.reps, "rows": rows, "summary": summary,
                   "machine": {"cpus": os.cpu_count()}}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
