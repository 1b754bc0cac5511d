"""Benchmark (not a test): the CPU one judgement of `preflight watch` takes, by the number of
ranks it judges (the watch judges every interval, 5 s by default).

    .venv/bin/python bench/bench_judge.py [--hosts 16,128,1000] [--ranks-per-host 8]
        [--repeat 5] [--baseline DIR] [--out bench-judge.json]

Each size is a healthy synchronous job of hosts x ranks-per-host ranks, fed as the real
sampler's lines (tests/watchtools.py prints them in its shape, tests/fixtures/watch holds
captured ones) for 40 s of samples at the default interval, with a CPU quota planted on one
rank of one host from the middle on (throttled, the job at a third of its pace: a fault the
rules name) so that the straggler rules run their full course; then, `--repeat` times as the
watch runs, a new sample from every host and one judgement. Reported per size: the ranks,
the CPU of one judgement (the median of the repeats, process time), the CPU per rank, whose
steadiness across sizes says the cost is linear, what the findings named, and the CPU that
reading one interval's samples took (the lines made beforehand: the fake hosts' writing them
is not the watch's work), on average and in the first interval (every host, launcher and
rank new there). It exits 1 where a size's judgement did not name the
planted host, and it alone: a judgement that names nobody has not run the rules it times.

Each size runs in a fresh child process. --baseline DIR (a checkout of another commit, `git
worktree add DIR REV`) judges each size with that commit's preflight too, in a child process
right after this one's, and reports the ratio of the two judgements and both feedings."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from watchtools import POLICY, FakeHost, FakeRank  # noqa: E402

import preflight  # noqa: E402
from preflight.model.findings import Status  # noqa: E402
from preflight.watch.judge import judge  # noqa: E402
from preflight.watch.samples import HostStream  # noqa: E402
from preflight.watch.series import WatchState  # noqa: E402

SECONDS = 40.0


def one(hosts: int, per_host: int, repeat: int) -> dict[str, Any]:
    fleet = [FakeHost(f"node{i:04d}", [FakeRank(1000 + j, i * per_host + j, quota=2.0)
                                         for j in range(per_host)],
                      netns=f"net:[{4026532000 + i}]") for i in range(hosts)]
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in fleet}
    steps = int(SECONDS / POLICY.interval_s)
    fed = 0.0
    first = 0.0  # the first interval's: every host, launcher and rank new
    cpu = []
    findings = []
    victim = fleet[hosts // 2]
    for i in range(steps + 1 + repeat):
        if i == steps // 2:
            # A CPU quota on one host (a fault the rules name): its first rank throttled in
            # most periods and busy to its quota, the job at a third of its pace, its peers asleep
            # in the collective waiting for it.
            # (tests/watchtools.quota_starved's shape, on one rank of a host of many)
            for h in fleet:
                for r in h.ranks:
                    r.busy, r.steps_per_s = 0.16, r.steps_per_s / 3
            slowed = victim.ranks[0]
            slowed.busy, slowed.wait, slowed.quota, slowed.throttled_share = 0.73, 0.64, 0.25, 0.9
            slowed.state = "R"
        # The lines as the samplers send them, made first: the fake hosts' writing them is
        # not the watch's work.
        lines = [(streams[h.name], h.line(POLICY.interval_s)) for h in fleet]
        t0 = time.process_time()
        for stream, line in lines:
            state.add(stream.feed(line), received=float(i))
        fed += time.process_time() - t0
        if i == 0:
            first = fed
        if i > steps:  # as the watch runs: new samples from every host, then one judgement
            t0 = time.process_time()
            findings = judge(state, POLICY, float(i), {}, {})
            cpu.append(time.process_time() - t0)
    per = statistics.median(cpu)
    ranks = hosts * per_host
    return {"preflight": os.path.dirname(os.path.abspath(preflight.__file__)),
            "hosts": hosts, "ranks": ranks, "judgement_cpu_s": round(per, 4),
            "cpu_per_rank_us": round(per / ranks * 1e6, 2),
            "feeding_cpu_per_interval_s": round(fed / (steps + 1 + repeat), 3),
            "feeding_cpu_first_interval_s": round(first, 3),
            "planted": victim.name,
            "named": sorted({(f.check, f.hosts[0] if f.hosts else "") for f in findings
                             if f.status is not Status.PASS})}


def baseline(src: str, hosts: int, per_host: int, repeat: int) -> dict[str, Any]:
    """one() with the preflight of the checkout src, in a child process of its own (each
    size, this version's too: a process that judged a smaller job first carries its
    memory, and its larger judgements ran a fifth slower than in a fresh one)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import json, sys; sys.path.insert(0, {here!r}); import bench_judge; "
            f"print(json.dumps(bench_judge.one({hosts}, {per_host}, {repeat})))")
    done = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                          text=True, check=True, timeout=3600)
    got = dict(json.loads(done.stdout.splitlines()[-1]))
    if not got["preflight"].startswith(os.path.abspath(src)):
        raise SystemExit(f"the baseline ran {got['preflight']}, not {src}'s preflight")
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="16,128,1000")
    ap.add_argument("--ranks-per-host", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", help="a checkout of another commit, judged alongside")
    ap.add_argument("--out", default="bench-judge.json")
    args = ap.parse_args()
    results = []
    wrong: list[str] = []
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for n in (int(x) for x in args.hosts.split(",")):
        r = baseline(here, n, args.ranks_per_host, args.repeat)
        if args.baseline:
            base = baseline(args.baseline, n, args.ranks_per_host, args.repeat)
            r["baseline_judgement_cpu_s"] = base["judgement_cpu_s"]
            r["baseline_named"] = base["named"]
            r["baseline_feeding_cpu_per_interval_s"] = base["feeding_cpu_per_interval_s"]
            r["baseline_feeding_cpu_first_interval_s"] = base.get(
                "feeding_cpu_first_interval_s")
            r["speedup"] = round(base["judgement_cpu_s"] / max(r["judgement_cpu_s"], 1e-9), 1)
        print(json.dumps(r), flush=True)
        results.append(r)
        # What it measures is a judgement that names the fault: its host, and nobody else.
        if [tuple(x) for x in r["named"]] != [("straggler", r["planted"])]:
            wrong.append(f"{r['ranks']} ranks: named {r['named']}, planted on {r['planted']}")
    with open(args.out, "w") as fh:
        json.dump({"when": time.strftime("%Y-%m-%d"), "policy": POLICY.__dict__,
                   "ranks_per_host": args.ranks_per_host, "results": results}, fh, indent=1)
    if wrong:
        print("the judgement did not name the planted host alone: " + "; ".join(wrong),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
