"""Benchmark (on demand, not a test): what `preflight watch` costs the controller per host and
sample, and what its sampler costs each host, so that a watch of 1,000 hosts can be
extrapolated from what one machine can simulate.

    sudo .venv/bin/python bench/bench_watch.py [--sizes 8,64] [--seconds 60]
        [--interval 5] [--ranks 2] [--children 4] [--out bench-watch.json]

For each size: that many simulated hosts, each running a stand-in Paddle job (a module run as
python -m paddle.distributed.launch, with `ranks` ranks printing a step line 20 times a
second), watched by the real CLI (`preflight watch -i ... --for S`) in the testbed's client
namespace over SSH. The controller's CPU is the watch process's (user + system, from its
rusage), in all and while its samplers ran (its results log's end record: start-up and
connecting aside); per host and sample it is that over hosts x samples taken. The sampler's CPU per
sample is read from its own lines (cost_s). The watch's cost to a job is the samplers' CPU
beside it: a job loses at most that share of a core per host. With --children N, each size is
watched twice, side by side: its ranks alone, then each rank with N children (DataLoader
workers: they inherit its rank variables and count toward it), for what the sampler's walk of
a rank's descendants costs."""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from typing import Any

from preflight.testing import testbed

LAUNCHER = """\
import os, subprocess, sys, time
procs = []
for i in range(int(sys.argv[-1])):
    env = dict(os.environ, PADDLE_TRAINER_ID=str(i))
    out = open("/tmp/bench-workerlog.%d.%d" % (os.getpid(), i), "w")
    procs.append(subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=out))
time.sleep(float(os.environ["BENCH_S"]))
for p in procs:
    p.kill()
"""
# A DataLoader worker: it idles until its rank is gone.
WORKER = "import os, time\nwhile os.getppid() != 1:\n    time.sleep(1)\n"
RANK = ("import os, subprocess, sys, time\n"
        f"workers = [subprocess.Popen([sys.executable, '-c', {WORKER!r}])\n"
        "           for _ in range(int(os.environ.get('BENCH_CHILDREN', '0')))]\n"
        "for n in range(10**9):\n    time.sleep(0.05)\n"
        "    print('step %d loss 0.1' % n, flush=True)\n")


def stand_in(tb: testbed.Testbed, name: str, ranks: int, seconds: float,
             children: int = 0) -> subprocess.Popen[bytes]:
    """The stand-in job on one simulated host (its namespace and cgroup)."""
    pkg = os.path.join(tb.base, "fake", "paddle", "distributed", "launch")
    if not os.path.isdir(pkg):
        os.makedirs(pkg)
        for d in (pkg, os.path.dirname(pkg), os.path.dirname(os.path.dirname(pkg))):
            open(os.path.join(d, "__init__.py"), "w").close()
        with open(os.path.join(pkg, "__main__.py"), "w") as fh:
            fh.write(f"RANK = {RANK!r}\n{LAUNCHER}")
    host = tb.hosts[name]
    env = dict(os.environ, PYTHONPATH=os.path.join(tb.base, "fake"), BENCH_S=str(seconds),
               BENCH_CHILDREN=str(children))
    p = subprocess.Popen(["nsenter", f"--net=/run/netns/{host.ns}", "python3", "-m",
                          "paddle.distributed.launch", str(ranks)], env=env,
                         stdin=subprocess.DEVNULL)
    host.extra.append(p)
    tb._into_cgroups(host, p.pid)
    return p


def one(tb: testbed.Testbed, names: list[str], args: argparse.Namespace,
        children: int = 0) -> dict[str, Any]:
    jobs = [stand_in(tb, n, args.ranks, args.seconds + 30, children) for n in names]
    time.sleep(3 + len(names) / 8)  # every rank started
    inv = tb.inventory(os.path.join(tb.base, f"watch-{len(names)}-{children}.yaml"), names)
    log = os.path.join(tb.base, f"watch-{len(names)}-{children}.jsonl")
    cmd = tb.client_cmd([sys.executable, "-m", "preflight", "watch", "-i", inv,
                         "--interval", str(args.interval), "--for", str(args.seconds),
                         "--log", log])
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONSAFEPATH="1"))
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    for j in jobs:
        j.kill()
        j.wait(10)
    for f in glob.glob("/tmp/bench-workerlog.*"):
        os.unlink(f)
    samples: dict[str, list[dict[str, Any]]] = {}
    end: dict[str, Any] = {}
    with open(log) as fh:
        for line in fh:
            r = json.loads(line)
            if r["type"] == "sample":
                samples.setdefault(r["host"], []).append(r["sample"])
            elif r["type"] == "end":
                end = r
    n = sum(len(v) for v in samples.values())
    ranks = [len(j["ranks"]) for v in samples.values() for s in v for j in s["jobs"]]
    per_sample = [(v[-1]["cost_s"] - v[0]["cost_s"]) / (len(v) - 1)
                  for v in samples.values() if len(v) > 1]
    cpu = usage.ru_utime + usage.ru_stime
    return {"hosts": len(names), "children_per_rank": children,
            "exit": os.waitstatus_to_exitcode(status), "wall_s": wall,
            "samples": n, "ranks_per_sample": sum(ranks) / max(1, len(ranks)),
            "controller_cpu_s": cpu,
            "controller_cpu_ms_per_host_sample": 1000 * cpu / max(1, n),
            # while the samplers ran: what watching costs, start-up and connecting aside
            "watching_cpu_s": end.get("cpu_s"),
            "watching_cpu_ms_per_host_sample": 1000 * end.get("cpu_s", 0.0) / max(1, n),
            "sampler_cpu_ms_per_sample": 1000 * sum(per_sample) / max(1, len(per_sample)),
            "sampler_core_share_at_interval": sum(per_sample) / max(1, len(per_sample))
            / args.interval}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,64")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--children", type=int, default=0,
                    help="also watch each size with this many children a rank, side by side")
    ap.add_argument("--out", default="bench-watch.json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    with testbed.Testbed(max(sizes)) as tb:
        names = list(tb.hosts)
        for size in sizes:
            for children in sorted({0, args.children}):
                rows.append(one(tb, names[:size], args, children))
                print(json.dumps(rows[-1]), flush=True)
    if args.children:  # the sampler's cost of a rank's descendants, measured side by side
        for size in sizes:
            alone, kids = (next(r for r in rows if r["hosts"] == size
                                and r["children_per_rank"] == c) for c in (0, args.children))
            ratio = kids["sampler_cpu_ms_per_sample"] / max(
                1e-9, alone["sampler_cpu_ms_per_sample"])
            print(f"{size} hosts: the sampler costs {ratio:.2f} x as much a sample with "
                  f"{args.children} children a rank ({kids['sampler_cpu_ms_per_sample']:.2f} "
                  f"ms against {alone['sampler_cpu_ms_per_sample']:.2f} ms)")
    # The controller's cost grows with hosts x samples: 1,000 hosts every 5 s.
    worst = max(r["watching_cpu_ms_per_host_sample"] for r in rows)
    at_1000 = worst / 1000 * 1000 / 5.0
    print(f"1,000 hosts every 5 s: {at_1000:.3f} of a core for the controller "
          f"(at the worst per-sample cost measured while watching, {worst:.2f} ms)")
    with open(args.out, "w") as fh:
        json.dump({"sizes": sizes, "args": vars(args), "rows": rows,
                   "controller_cores_1000_hosts_5s": at_1000,
                   "machine": {"cpus": os.cpu_count()}}, fh, indent=2)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
