"""Benchmark (on demand, not a test): `preflight watch` on a healthy job of the shapes real
clusters have, for a long stretch, then the same job with faults planted one after another.

    sudo .venv/bin/python bench/bench_watch_shapes.py [--healthy 600] [--faults] [--stalls]
        [--out bench/results/watch-shapes-DATE.json]

Three simulated hosts run a data-parallel gloo job (Paddle 3.3.1) that `preflight launch`
started from a GO report with two ranks a host (`--nproc-per-node 2`); rank 0 also evaluates
every 20 steps (its peers wait for it then); global rank 5 (on the third host) sends its
output to a pipe (a log shipper), not a file; the third host's clock runs 8 s ahead
(libfaketime, for every command run there after the check: its launcher, its ranks and the
watch's sampler); every host's link is shaped to 150 Mbit/s, which the job's own all-reduce
keeps full at times. The watch runs with its defaults (`--interval 5 --persist 15`) for --healthy
seconds: every finding it says is counted by check and status; a failure there is a false
blame.

With --faults, the faults are planted after it, one at a time on the second host, each
undone before the next: SIGSTOP of its rank 2 (20 s), a 0.05-core CPU quota on its cgroup
(its two ranks' share), its link cut to 2 Mbit/s, and SIGKILL of its rank 2 (the job ends).
For each, the seconds from planting to the first finding that names the host, what it
says, and to when `--act` would act: the next judgement naming it again (the watch's
confirmation, one interval), where it did.

With --stalls, other faults are planted on the second host the same way: its link slowed to
30 Mbit/s (a fifth of its peers'), other work spinning on eight cores in its cgroup (a noisy
neighbour), its log filesystem frozen (a storage stall: its ranks wait in state D on their
next log line) and its ranks frozen by the cgroup freezer. The two stalls last 22 s: a gloo
collective waits 30 s at most, and a longer stall ends the job."""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, Optional

from rigjob import cli, interrupt  # bench/, beside this file

from preflight.model.watch import ACT_AFTER_S
from preflight.testing import testbed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from jobscripts import TRAIN_SHAPES as TRAIN  # noqa: E402  (tests/ is put on the path first)
from jobscripts import TRAIN_SHAPES_PATH as SCRIPT  # noqa: E402

HOSTS = ["shape1", "shape2", "shape3"]
SKEWED, FAULTY = "shape3", "shape2"
SKEW_S = 8
LINK = "150mbit"  # the all-reduce keeps it full at times: its send queues fill
# Processes spinning in its cgroup, the noisy neighbour: its ranks share the host's CPU time
# with them (every host's cgroup weighs the same), and wait for a CPU.
NOISY = 8
LOG_FS = "/root/log"  # the launcher's --log_dir on the faulty host (Paddle's default: log)




def records(path: str) -> list[dict[str, Any]]:
    out = []
    with open(path) as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                break
    return out


def rank_pid(log: str, host: str, rank: int, deadline: float) -> int:
    """The pid of the job's rank on host, from the watch's samples."""
    while time.monotonic() < deadline:
        for r in reversed(records(log)) if os.path.exists(log) else ():
            if r.get("type") != "sample" or r.get("host") != host:
                continue
            for job in r["sample"].get("jobs") or ():
                for rk in job.get("ranks") or ():
                    who = rk.get("who") or {}
                    if who.get("PADDLE_TRAINER_ID") == str(rank):
                        return int(rk["pid"])
        time.sleep(1)
    raise RuntimeError(f"no rank {rank} seen on {host}")


def first_naming(log: str, host: str, after: float, deadline: float
                 ) -> Optional[dict[str, Any]]:
    while time.monotonic() < deadline:
        for r in records(log):
            if (r.get("type") == "finding" and r["at"] >= after and r["status"] != "pass"
                    and host in r["hosts"]):
                return r
        time.sleep(1)
    return None


def held_until(log: str, found: dict[str, Any], confirm_s: float) -> Optional[float]:
    """When the finding had held through the confirmation (not cleared before): when --act
    acts on it; None where it cleared first."""
    key = (found["check"], tuple(found["hosts"]))
    acts = float(found["at"]) + confirm_s
    for r in records(log):
        if r["at"] <= found["at"]:
            continue
        if r.get("type") == "cleared" and (r["check"], tuple(r["hosts"])) == key:
            return None if r["at"] < acts else acts
    return acts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--healthy", type=float, default=600.0, help="seconds watched healthy")
    ap.add_argument("--faults", action="store_true", help="then plant the faults")
    ap.add_argument("--stalls", action="store_true", help="then plant the slow link, noisy "
                    "neighbour, storage stall and frozen cgroup")
    ap.add_argument("--out", default="bench-watch-shapes.json")
    ap.add_argument("--keep-log", help="copy the watch's log here (the testbed goes)")
    args = ap.parse_args()
    faketime = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if not faketime:
        print("libfaketime missing (Debian package faketime)", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"hosts": HOSTS, "link": LINK, "skewed": SKEWED,
                              "skew_s": SKEW_S, "healthy_s": args.healthy}
    with testbed.Testbed(len(HOSTS), names=HOSTS) as tb:
        for name in HOSTS:
            tb.write_file(name, SCRIPT, TRAIN)
        inv = tb.inventory(os.path.join(tb.base, "shapes.yaml"), HOSTS,
                           python=testbed.paddle_python("3.3.1"))
        report = os.path.join(tb.base, "shapes-report.json")
        check = cli(tb, "check", "-i", inv, "--nnodes", "3", "--nproc-per-node", "2",
                    "--no-network-tests", "--json", report, "--no-progress", "--no-log")
        out, err = check.communicate(timeout=600)
        if check.returncode != 0:
            print(out + err, file=sys.stderr)
            return 1
        tb.login_env(SKEWED, [f"export LD_PRELOAD={faketime[0]} FAKETIME=+{SKEW_S}s"])
        if args.stalls:  # its ranks' logs (the launcher's log/, in its home) on a fs of its own
            tb.scratch_fs(FAULTY, LOG_FS)
        for name in HOSTS:
            tb.throttle(name, LINK)
        launch = cli(tb, "launch", "--plan", report, "--timeout", "7200", "--",
                     os.path.basename(SCRIPT), str(10 ** 7), quiet=True)
        wlog = os.path.join(tb.base, "watch-shapes.jsonl")
        # its start, the faults
        length = 30 + args.healthy + (450 if args.faults else 0) + (450 if args.stalls else 0)
        watch = cli(tb, "watch", "--plan", report, "--log", wlog, "--for", f"{length:.0f}")
        try:
            time.sleep(20)  # the job starts (Paddle's import on six ranks, two cores)
            began = time.time()
            end = time.monotonic() + args.healthy
            while time.monotonic() < end:
                if launch.poll() is not None or watch.poll() is not None:
                    break
                time.sleep(5)
            rs = [r for r in records(wlog) if r.get("at", 0) <= began + args.healthy]
            said = collections.Counter((r["check"], r["status"]) for r in rs
                                       if r.get("type") == "finding")
            result["healthy"] = {
                "began": round(began, 3),
                "watched_s": round(time.time() - began, 1),
                "job_running": launch.poll() is None,
                "findings": {f"{c} {s}": n for (c, s), n in sorted(said.items())},
                "not_pass": [{"at": round(r["at"] - began, 1), "check": r["check"],
                              "status": r["status"], "message": r["message"]}
                             for r in rs if r.get("type") == "finding"
                             and r["status"] != "pass"],
                "pass_lines": sorted({r["message"][:160] for r in rs
                                      if r.get("type") == "finding" and r["status"] == "pass"
                                      and r["check"] != "progress"})}
            result["healthy"]["busy_cores"] = busy_by_rank(rs)
            print(json.dumps(result["healthy"], indent=2), flush=True)
            if args.faults and launch.poll() is None:
                result["faults"] = plant_faults(tb, wlog)
            if args.stalls and launch.poll() is None:
                result["stalls"] = plant_stalls(tb, wlog)
        finally:
            interrupt((watch, launch))
            tb.unlimit_cpu(FAULTY)
            if args.keep_log and os.path.exists(wlog):
                shutil.copy(wlog, args.keep_log)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"written: {args.out}")
    return 0


def busy_by_rank(rs: list[dict[str, Any]]) -> dict[str, float]:
    """Each rank's cores busy (on a CPU or waiting for one) over the stretch, from its first
    and last samples: a rank 0 that evaluates is busier than its peers."""
    names: dict[int, str] = {}  # pid -> "rank N" (its variables come in its first sample)
    seen: dict[int, list[tuple[float, float]]] = {}
    for r in rs:
        if r.get("type") != "sample":
            continue
        for job in r["sample"].get("jobs") or ():
            for rk in job.get("ranks") or ():
                rank = (rk.get("who") or {}).get("PADDLE_TRAINER_ID")
                if rank is not None:
                    names[rk["pid"]] = f"rank {rank}"
                if "run_s" in rk:
                    seen.setdefault(rk["pid"], []).append(
                        (r["sample"]["t"], rk["run_s"] + rk["wait_s"]))
    return {names.get(pid, f"pid {pid}"): round((v[-1][1] - v[0][1]) / (v[-1][0] - v[0][0]), 2)
            for pid, v in sorted(seen.items()) if len(v) >= 2 and v[-1][0] > v[0][0]}


class Timing:
    """The rows a fault planting makes: when each fault was planted and undone (this
    machine's clock, the watch's log's: the corpus's label), and what the watch said."""

    def __init__(self, wlog: str) -> None:
        self.wlog = wlog
        self.rows: list[dict[str, Any]] = []

    def timed(self, fault: str, found: Optional[dict[str, Any]], planted: float) -> None:
        confirm = ACT_AFTER_S  # --act acts once a host is named this long without a break
        row: dict[str, Any] = {"fault": fault, "planted": round(planted, 3),
                               "undone": round(time.time(), 3)}
        if found is None:
            row["found"] = None
        else:
            acts = held_until(self.wlog, found, confirm)
            row.update(found_s=round(found["at"] - planted, 1), check=found["check"],
                       status=found["status"], hosts=found["hosts"],
                       message=found["message"][:300],
                       act_s=None if acts is None else round(acts - planted, 1))
        self.rows.append(row)
        print(json.dumps(row), flush=True)


def plant_faults(tb: testbed.Testbed, wlog: str) -> list[dict[str, Any]]:
    out = Timing(wlog)
    pid = rank_pid(wlog, FAULTY, 2, time.monotonic() + 30)
    planted = time.time()
    os.kill(pid, signal.SIGSTOP)
    found = first_naming(wlog, FAULTY, planted, time.monotonic() + 60)
    time.sleep(max(0.0, planted + 20 - time.time()))
    os.kill(pid, signal.SIGCONT)
    out.timed("SIGSTOP of rank 2", found, planted)
    time.sleep(45)  # the job steps again, the findings clear
    planted = time.time()
    tb.limit_cpu(FAULTY, 0.05)
    found = first_naming(wlog, FAULTY, planted, time.monotonic() + 90)
    time.sleep(20)
    tb.unlimit_cpu(FAULTY)
    out.timed("0.05-core CPU quota", found, planted)
    time.sleep(45)
    planted = time.time()
    tb.unthrottle(FAULTY)
    tb.throttle(FAULTY, "2mbit")
    found = first_naming(wlog, FAULTY, planted, time.monotonic() + 90)
    time.sleep(20)
    tb.unthrottle(FAULTY)
    tb.throttle(FAULTY, LINK)
    out.timed("link cut to 2 Mbit/s", found, planted)
    time.sleep(45)
    pid = rank_pid(wlog, FAULTY, 2, time.monotonic() + 30)
    planted = time.time()
    os.kill(pid, signal.SIGKILL)
    found = first_naming(wlog, FAULTY, planted, time.monotonic() + 60)
    time.sleep(20)
    out.timed("SIGKILL of rank 2", found, planted)
    return out.rows


def plant_stalls(tb: testbed.Testbed, wlog: str) -> list[dict[str, Any]]:
    """The slowed link, the noisy neighbour, the storage stall and the frozen cgroup, each
    for its time and undone, the job left 45 s to step again after each."""
    out = Timing(wlog)

    def held(fault: str, planted: float, seconds: float, undo: Callable[[], None]) -> None:
        found = first_naming(wlog, FAULTY, planted, time.monotonic() + seconds)
        time.sleep(max(0.0, planted + seconds - time.time()))
        undo()
        out.timed(fault, found, planted)
        time.sleep(45)

    def mend_link() -> None:
        tb.unthrottle(FAULTY)
        tb.throttle(FAULTY, LINK)

    planted = time.time()
    tb.unthrottle(FAULTY)
    tb.throttle(FAULTY, "30mbit")
    held("link slowed to 30 Mbit/s", planted, 40, mend_link)
    planted = time.time()
    tb.busy(FAULTY, NOISY)
    held(f"other work spinning on {NOISY} cores", planted, 40, lambda: tb.idle(FAULTY))
    planted = time.time()
    tb.freeze_fs(FAULTY, LOG_FS)
    held("its log filesystem frozen", planted, 22, lambda: tb.thaw_fs(FAULTY, LOG_FS))
    pids = [rank_pid(wlog, FAULTY, r, time.monotonic() + 30) for r in (2, 3)]
    planted = time.time()
    tb.freeze(FAULTY, pids)
    held("its ranks frozen (cgroup freezer)", planted, 22, lambda: tb.thaw(FAULTY))
    return out.rows


if __name__ == "__main__":
    sys.exit(main())
