"""Capture (on demand, not a test): a gloo job in a real Slurm, watched through its own
allocation, suspended and resumed by Slurm, then cancelled, for the watch's labelled corpus
(tests/corpus/watch/cases.yaml).

    sudo .venv/bin/python bench/capture_watch_slurm.py [--healthy 180] [--suspend 60]
        --log slurm.jsonl --out slurm.json

A Slurm of three simulated nodes (tests/slurmrig.py: slurmctld, one slurmd a node,
proctrack/linuxproc) runs the data-parallel gloo job (Paddle 3.3.1) that `preflight launch
--transport slurm` submitted from a GO report; the watch follows it with its defaults through
that allocation (`--transport slurm --jobid`: its samplers are steps of the job) for --healthy
seconds; then `scontrol suspend` (Slurm stops every process of the job, the watch's samplers
among them) for --suspend seconds, `scontrol resume`, --healthy/2 seconds more, and `scancel`.
Nothing there is a fault of a host: the label is healthy. The times of each Slurm command
(this machine's clock, the watch log's) go to --out."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from preflight.testing import testbed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import slurmrig  # noqa: E402  (tests/ on the path)
from jobscripts import TRAIN_WATCH, TRAIN_WATCH_PATH  # noqa: E402

NODES = ["node1", "node2", "node3"]
PADDLE = testbed.paddle_python("3.3.1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--healthy", type=float, default=180.0)
    ap.add_argument("--suspend", type=float, default=60.0)
    ap.add_argument("--log", required=True, help="copy the watch's log here")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    why = testbed.can_run() or slurmrig.can_run()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    events: dict[str, Any] = {}
    with testbed.Testbed(len(NODES), names=NODES) as tb:
        slurm = slurmrig.Slurm(tb)
        env = dict(slurm.env, PYTHONSAFEPATH="1")
        launch = watch = None
        job = ""
        try:
            for n in NODES:
                tb.write_file(n, TRAIN_WATCH_PATH, TRAIN_WATCH)
            inv = tb.inventory(os.path.join(tb.base, "nodes.yaml"), NODES, python=PADDLE)
            report = os.path.join(tb.base, "slurm-report.json")
            check = subprocess.run(slurm.cmd([
                sys.executable, "-m", "preflight", "check", "--transport", "slurm", "-i", inv,
                "--no-network-tests", "--json", report, "--no-log", "--no-progress"]),
                capture_output=True, text=True, timeout=300, env=env, cwd=tb.base)
            if check.returncode != 0:
                print(check.stdout + check.stderr, file=sys.stderr)
                return 1
            launch = subprocess.Popen(slurm.cmd([
                sys.executable, "-m", "preflight", "launch", "--transport", "slurm", "--plan",
                report, "--chdir", "/root", "--timeout", "3600", "--",
                os.path.basename(TRAIN_WATCH_PATH), str(10 ** 7)]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tb.base,
                preexec_fn=os.setsid)
            end = time.monotonic() + 90
            while not job and time.monotonic() < end:
                time.sleep(1)
                job = slurm.run("squeue", "-h", "-t", "R", "-o", "%i").stdout.strip()
            if not job:
                print("the job did not start", file=sys.stderr)
                return 1
            log = os.path.join(tb.base, "watch-slurm.jsonl")
            length = 30 + args.healthy * 1.5 + args.suspend + 60
            watch = subprocess.Popen(slurm.cmd([
                sys.executable, "-m", "preflight", "watch", "--plan", report, "--transport",
                "slurm", "--jobid", job, "--for", f"{length:.0f}", "--log", log]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tb.base)
            events["watched"] = round(time.time(), 3)
            time.sleep(args.healthy)
            events["suspended"] = round(time.time(), 3)
            print(slurm.run("scontrol", "suspend", job).stderr.strip(), flush=True)
            time.sleep(args.suspend)
            events["resumed"] = round(time.time(), 3)
            print(slurm.run("scontrol", "resume", job).stderr.strip(), flush=True)
            time.sleep(args.healthy / 2)
            events["cancelled"] = round(time.time(), 3)
            slurm.run("scancel", job)
            try:
                watch.wait(120)  # it ends with the job
            except subprocess.TimeoutExpired:
                pass
            events["watch_rc"] = watch.poll()
            shutil.copy(log, args.log)
        finally:
            for p in (watch, launch):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait(30)
            if job:
                slurm.run("scancel", job)
            slurm.close()
    with open(args.out, "w") as fh:
        json.dump({"job": job, **events}, fh, indent=2)
    print(json.dumps(events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
