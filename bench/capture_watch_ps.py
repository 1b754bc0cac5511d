"""Capture (on demand, not a test): a real parameter-server job watched from its launch, for the
watch's labelled corpus (tests/corpus/watch/cases.yaml).

    sudo .venv/bin/python bench/capture_watch_ps.py [--healthy 600] [--faults]
        --log ps.jsonl --out ps.json

Three simulated hosts run Paddle 2.6.2's async PS job that `preflight launch` started from a
GO report (`mode: ps`, one server on ps1, a trainer on ps2 and on ps3); the watch runs with
its defaults from right after the launch (the documented `preflight launch ... &` then
`preflight watch`), through the job's start, for --healthy seconds. With --faults, then, one
at a time and each undone before the next: a trainer (ps3's) stopped for 20 s, a 0.01-core
quota on that trainer's process for 40 s, and the same quota on the server's for 40 s. Each
fault's host and its planting and undoing times (this machine's clock, the watch log's) go
to --out: the label of the case."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from typing import Any

from rigjob import cli, interrupt  # bench/, beside this file

from preflight.testing import testbed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from jobscripts import TRAIN_PS_WATCH, TRAIN_PS_WATCH_PATH  # noqa: E402  (tests/ on the path)

HOSTS = ["ps1", "ps2", "ps3"]
ROLES: dict[str, dict[str, object]] = {
    "ps1": {"roles": ["server"]}, "ps2": {"roles": ["worker"]}, "ps3": {"roles": ["worker"]}}




def rank_pid(log: str, host: str, role: str, deadline: float) -> int:
    """The pid of host's rank of that role (TRAINING_ROLE), from the watch's samples."""
    while time.monotonic() < deadline:
        try:
            with open(log) as fh:
                recs = [json.loads(ln) for ln in fh if ln.endswith("\n")]
        except OSError:
            recs = []
        for r in reversed(recs):
            if r.get("type") != "sample" or r.get("host") != host:
                continue
            for job in r["sample"].get("jobs") or ():
                for rk in job.get("ranks") or ():
                    if (rk.get("who") or {}).get("TRAINING_ROLE") == role:
                        return int(rk["pid"])
        time.sleep(1)
    raise RuntimeError(f"no {role} seen on {host}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--healthy", type=float, default=600.0)
    ap.add_argument("--faults", action="store_true")
    ap.add_argument("--log", required=True, help="where the watch's log is copied")
    ap.add_argument("--out", required=True, help="the faults planted, as JSON")
    args = ap.parse_args()
    result: dict[str, Any] = {"hosts": HOSTS, "faults": []}
    with testbed.Testbed(len(HOSTS), names=HOSTS) as tb:
        for name in HOSTS:
            tb.write_file(name, TRAIN_PS_WATCH_PATH, TRAIN_PS_WATCH)
        inv = tb.inventory(os.path.join(tb.base, "ps.yaml"), HOSTS, overrides=ROLES,
                           python=testbed.paddle_python("2.6.2"))
        policy = os.path.join(tb.base, "ps.policy.yaml")
        with open(policy, "w") as fh:
            fh.write("mode: ps\nserver_num: 1\ntrainer_num: 2\n")
        report = os.path.join(tb.base, "ps-report.json")
        check = cli(tb, "check", "-i", inv, "--policy", policy, "--no-network-tests",
                    "--json", report, "--no-progress", "--no-log")
        _, err = check.communicate(timeout=600)
        if check.returncode != 0:
            print(err, file=sys.stderr)
            return 1
        wlog = os.path.join(tb.base, "watch-ps.jsonl")
        launch = cli(tb, "launch", "--plan", report, "--timeout", "7200", "--",
                     os.path.basename(TRAIN_PS_WATCH_PATH), str(10 ** 8))
        length = 60 + args.healthy + (200 if args.faults else 0)
        watch = cli(tb, "watch", "--plan", report, "--log", wlog, "--for", f"{length:.0f}")
        result["began"] = time.time()
        try:
            end = time.monotonic() + 60 + args.healthy
            while time.monotonic() < end and launch.poll() is None and watch.poll() is None:
                time.sleep(5)
            result["healthy_until"] = time.time()
            if args.faults and launch.poll() is None:
                result["faults"] = plant(tb, wlog)
        finally:
            interrupt((watch, launch))
            if os.path.exists(wlog):
                shutil.copy(wlog, args.log)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps(result, indent=2))
    return 0


def plant(tb: testbed.Testbed, wlog: str) -> list[dict[str, Any]]:
    out = []
    trainer = rank_pid(wlog, "ps3", "TRAINER", time.monotonic() + 30)
    planted = time.time()
    os.kill(trainer, signal.SIGSTOP)
    time.sleep(20)
    os.kill(trainer, signal.SIGCONT)
    out.append({"what": "SIGSTOP of ps3's trainer", "host": "ps3", "planted": planted,
                "undone": time.time()})
    time.sleep(45)
    for host, role in (("ps3", "TRAINER"), ("ps1", "PSERVER")):
        pid = rank_pid(wlog, host, role, time.monotonic() + 30)
        planted = time.time()
        cgroup = tb.limit_process_cpu(host, pid, 0.01 * testbed.usable_cpus())
        time.sleep(40)
        with open(os.path.join(cgroup, "cpu.cfs_quota_us"), "w") as fh:
            fh.write("-1")  # the quota lifted (the process stays in its cgroup)
        out.append({"what": f"0.01-core quota on {host}'s {role.lower()}", "host": host,
                    "planted": planted, "undone": time.time()})
        time.sleep(45)
    return out


if __name__ == "__main__":
    sys.exit(main())
