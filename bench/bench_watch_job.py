"""Benchmark (on demand, not a test): what `preflight watch` costs a running job, side by
side in one run: a data-parallel Paddle job on this machine (CPU, gloo, 2 ranks) trains a
fixed number of steps with no watch, then with `preflight watch` sampling it, alternately.

    .venv/bin/python bench/bench_watch_job.py [--steps 1500] [--reps 3] [--interval 5]
        [--out bench-watch-job.json]

The figure is the job's wall time a step with the watch over without it (medians of the
repetitions), next to the samplers' own CPU share of a core: the most the watch can take
from the job's CPUs."""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from preflight.testing import testbed

TRAIN = """\
import sys, time
import paddle
import paddle.distributed as dist
dist.init_parallel_env()
net = paddle.nn.Sequential(paddle.nn.Linear(64, 2048), paddle.nn.ReLU(), paddle.nn.Linear(2048, 1))
model = paddle.DataParallel(net)
opt = paddle.optimizer.SGD(0.01, parameters=model.parameters())
steps = int(sys.argv[1])
for step in range(steps + 20):
    if step == 20:  # warm: the timed steps start here
        t0 = time.perf_counter()
    x = paddle.randn([64, 64])
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    loss.backward(); opt.step(); opt.clear_grad()
    if step % 5 == 0:
        print("step %d" % step, flush=True)
print("STEP_S %.6f" % ((time.perf_counter() - t0) / steps), flush=True)
"""


def job(d: str, steps: int, watch_interval: float | None, name: str) -> dict[str, float]:
    w = None
    if watch_interval is not None:
        w = subprocess.Popen([sys.executable, "-m", "preflight", "watch", "--interval",
                              str(watch_interval), "--log", os.path.join(d, "w.jsonl")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, PYTHONSAFEPATH="1"))
    p = subprocess.run([testbed.paddle_python("3.3.1"), "-m", "paddle.distributed.launch",
                        "--nproc_per_node", "2", "--log_dir", os.path.join(d, name),
                        os.path.join(d, "train.py"), str(steps)], capture_output=True,
                       text=True, timeout=1200)
    cost = None
    if w is not None:
        w.send_signal(signal.SIGINT)
        w.wait(60)
        with open(os.path.join(d, "w.jsonl")) as fh:
            rs = [json.loads(line) for line in fh]
        os.unlink(os.path.join(d, "w.jsonl"))
        samples = [r["sample"] for r in rs if r["type"] == "sample"]
        if len(samples) > 1:
            cost = (samples[-1]["cost_s"] - samples[0]["cost_s"]) / (
                samples[-1]["t"] - samples[0]["t"])
    with open(os.path.join(d, name, "workerlog.0")) as fh:  # a fresh one: Paddle appends
        step_s = [float(line.split()[1]) for line in fh if line.startswith("STEP_S")]
    assert p.returncode == 0 and step_s, p.stdout[-2000:] + p.stderr[-2000:]
    return {"step_s": step_s[0], "sampler_core_share": cost} if cost is not None else \
        {"step_s": step_s[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--out", default="bench-watch-job.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "train.py"), "w") as fh:
            fh.write(TRAIN)
        for rep in range(args.reps):
            for watched in (False, True):
                r = job(d, args.steps, args.interval if watched else None,
                        f"log-{rep}-{int(watched)}")
                rows.append({"rep": rep, "watched": watched, **r})
                print(json.dumps(rows[-1]), flush=True)
                time.sleep(2)
    without = statistics.median(r["step_s"] for r in rows if not r["watched"])
    with_w = statistics.median(r["step_s"] for r in rows if r["watched"])
    share = statistics.median(r["sampler_core_share"] for r in rows
                              if r.get("sampler_core_share") is not None)
    print(f"step {1000 * without:.2f} ms without the watch, {1000 * with_w:.2f} ms with it: "
          f"{with_w / without:.4f}x; the sampler took {share:.2%} of a core")
    with open(args.out, "w") as fh:
        json.dump({"args": vars(args), "rows": rows, "step_s_without": without,
                   "step_s_with": with_w, "ratio": with_w / without,
                   "sampler_core_share": share, "machine": {"cpus": os.cpu_count()}}, fh,
                  indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
