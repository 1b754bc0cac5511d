"""`preflight watch` on a real parameter-server job: async PS on Paddle 2.6.2 (one server
host, two trainer hosts) started by `preflight launch` from a GO report; the server is starved
of CPU mid-run (a quota on its own cgroup, as on its container). In async mode the trainers
step on at their pace while the server falls behind: the watch names the server, on its host
and as a server, for its CPU, and neither a trainer nor a link."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from jobscripts import TRAIN_PS_WATCH, TRAIN_PS_WATCH_PATH
from watchtools import cli_popen, held, rank_pid, records

from preflight.testing import testbed

pytestmark = pytest.mark.cluster

HOSTS = ["good1", "good2", "good3"]
ROLES = {"good1": {"roles": ["server"]}, "good2": {"roles": ["worker"]},
         "good3": {"roles": ["worker"]}}


def _steps(cluster, host: str) -> int:
    n = 0
    for name in ("workerlog.0", "workerlog.1"):
        try:
            with open(cluster.private(host, f"/root/log/{name}")) as fh:
                n += sum(1 for line in fh if line.startswith("step "))
        except OSError:
            pass
    return n


def test_a_starved_ps_server_is_named_and_no_trainer(cluster):
    for name in HOSTS:
        cluster.tb.write_file(name, TRAIN_PS_WATCH_PATH, TRAIN_PS_WATCH)
        for log in ("workerlog.0", "workerlog.1", "serverlog.0"):
            path = cluster.private(name, f"/root/log/{log}")
            if os.path.exists(path):
                os.unlink(path)
    inv = cluster.inventory("watch-ps.yaml", HOSTS, python=cluster.paddle_b, overrides=ROLES)
    policy = cluster.policy("watch-ps.policy.yaml", "mode: ps\nserver_num: 1\ntrainer_num: 2\n")
    report = os.path.join(cluster.tb.base, "watch-ps-report.json")
    run = cluster.cli("check", "-i", inv, "--policy", policy, "--no-network-tests", "--json",
                      report, "--no-progress")
    assert run.rc == 0, run.stdout + run.stderr
    launch = cli_popen(cluster, "launch", "--plan", report, "--timeout", "300", "--",
                       os.path.basename(TRAIN_PS_WATCH_PATH), str(10 ** 7), quiet=True)
    wlog = os.path.join(cluster.tb.base, "watch-ps.jsonl")
    watch = None
    found = None
    try:
        end = time.monotonic() + 150
        while time.monotonic() < end and not all(_steps(cluster, h) >= 3
                                                 for h in ("good2", "good3")):
            assert launch.poll() is None, launch.stderr.read() if launch.stderr else ""
            time.sleep(1)
        assert all(_steps(cluster, h) >= 3 for h in ("good2", "good3")), "no trainer stepped"
        watch = cli_popen(cluster, "watch", "--plan", report, "--log", wlog, "--interval", "2",
                          "--persist", "10", "--for", "120")
        time.sleep(16)  # the trainers' early pace, before the fault
        server = rank_pid(wlog, "good1", time.monotonic() + 10)
        planted = time.time()
        # The server's own cgroup (as its container's) gets a quota below what it takes of
        # the CPUs its host shares with the trainers' hosts here (seen with one CPU for the
        # three: 0.03 cores, 0.26 s a second in the run queue), so that the quota, not that
        # queue, holds it; the host's sampler keeps the host's CPU.
        cluster.tb.limit_process_cpu("good1", server, 0.01 * testbed.usable_cpus())
        end = time.monotonic() + 80
        while time.monotonic() < end and found is None:
            time.sleep(1)
            found = next((r for r in records(wlog) if held(r)), None)
    finally:
        out = err = ""
        if watch is not None:
            watch.send_signal(signal.SIGINT)
            out, err = watch.communicate(timeout=60)
        launch.send_signal(signal.SIGINT)
        launch.wait(60)
    if found is None:  # what the watch saw of the server's host, and what it said
        rs = records(wlog)
        last = [r["sample"] for r in rs if r["type"] == "sample" and r["host"] == "good1"][-3:]
        said = [(r["check"], r["status"], r["message"][:300]) for r in rs
                if r["type"] == "finding"][-6:]
        print(json.dumps(last)[:6000], said, sep="\n")
    assert found is not None, out + err
    print(f"\nstarved PS server named {found['at'] - planted:.1f} s after the quota: "
          f"{found['message']}")
    assert found["at"] > planted, found["message"]  # nothing named while it was healthy
    assert found["check"] == "straggler" and found["hosts"] == ["good1"], found["message"]
    assert found["ranks"][0]["role"] == "server"
    # Async trainers step on (a warning), or slow alike or queue to it (it holds them).
    assert "holds every trainer" in found["message"] or \
        "is short of CPU" in found["message"], found["message"]
    assert "its cgroup's CPU quota throttles it" in found["message"], found["message"]
    named = {(tuple(r["hosts"]), r["ranks"][0]["role"] if r["ranks"] else None)
             for r in records(wlog) if held(r)}
    assert named == {(("good1",), "server")}, named
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_ps_watch")) == {}
