"""`preflight watch --act` on a real job: three of four simulated hosts run a collective gloo
job (Paddle 3.3.1) that `preflight launch` started from a GO report (`--nnodes 3`: the fourth
host is a spare); one host gets a CPU quota mid-run. The watch names it, stops the job, checks
the hosts again without it and launches the job again on the other two and the spare, then
follows the new job there. The training script restarts; its own checkpoint is its matter."""

from __future__ import annotations

import json
import os
import time

import pytest
from jobscripts import TRAIN_WATCH as TRAIN
from jobscripts import TRAIN_WATCH_PATH as SCRIPT
from watchtools import cli_popen, held, records, relaunched_on, steps_logged, stop_watched

pytestmark = pytest.mark.cluster

HOSTS = ["good1", "good2", "good3", "good4"]
SLOW = "good2"
# How long a host is named before it is acted on: shorter than the default 2 minutes, so the
# test waits less; the default is judged in the unit tests and the corpus.
ACT_AFTER = "10s"


def test_act_leaves_the_straggler_out_and_the_job_runs_again_on_the_spare(cluster, tmp_path):
    """A quota planted mid-run: the watch names the host, drains it, stops the job, checks
    again without it and launches on the spare.

    Its time: the job's start, the quota's naming, --act-after, the stop, a check and the
    relaunch's start, each a real step on the rig."""
    for name in HOSTS:
        cluster.tb.write_file(name, SCRIPT, TRAIN)
        log = cluster.private(name, "/root/log/workerlog.0")
        if os.path.exists(log):
            os.unlink(log)
    inv = cluster.inventory("act.yaml", HOSTS)
    report = os.path.join(cluster.tb.base, "act-report.json")
    run = cluster.cli("check", "-i", inv, "--nnodes", "3", "--no-network-tests", "--json",
                      report, "--no-progress")
    assert run.rc == 0, run.stdout + run.stderr
    with open(report) as fh:
        planned = [n["host"] for n in json.load(fh)["plan"]["nodes"]]
    assert SLOW in planned and len(planned) == 3
    spare = next(h for h in HOSTS if h not in planned)
    launch = cli_popen(cluster, "launch", "--plan", report, "--timeout", "400", "--",
                       "train_watch.py", str(10 ** 6), quiet=True)
    wlog = os.path.join(cluster.tb.base, "watch-act.jsonl")
    watch = None
    relaunch_pid = None
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and not all(steps_logged(cluster, h) >= 3 for h in planned):
            assert launch.poll() is None, launch.stderr.read() if launch.stderr else ""
            time.sleep(1)
        assert all(steps_logged(cluster, h) >= 3 for h in planned), "the job did not start stepping"
        watch = cli_popen(cluster, "watch", "--plan", report, "--log", wlog, "--interval", "2",
                          "--persist", "10", "--for", "200", "--act", "--act-after",
                          ACT_AFTER)
        time.sleep(8)
        planted = time.time()
        cluster.tb.limit_cpu(SLOW, 0.1)
        # The job runs again: the spare steps.
        stepping, relaunch_pid, acts = relaunched_on(cluster, watch, wlog, spare, 200)
        assert steps_logged(cluster, spare) >= 3, acts
        time.sleep(10)  # the watch follows the new job
    finally:
        cluster.tb.unlimit_cpu(SLOW)
        out, err = stop_watched(watch, relaunch_pid, launch)
    rs = records(wlog)
    named = [r for r in rs if held(r)]
    acted = next((r["at"] for r in rs if r["type"] == "act" and r["step"] == "drain"), None)
    print(f"\nafter the quota: named {named[0]['at'] - planted:.1f} s, acted on (its drain, "
          f"the job's stop) {(acted or planted) - planted:.1f} s, the job ran again on the "
          f"spare {stepping - planted:.1f} s" if named else "")
    assert named and named[0]["check"] == "straggler" and named[0]["hosts"] == [SLOW], \
        out + err
    steps = [r["step"] for r in rs if r["type"] == "act"]
    # Named, it is acted on only once named without a break for --act-after.
    assert steps == ["wait", "drain", "stop", "stop", "stop", "check", "check", "launch"], \
        out + err
    stops = [r for r in rs if r["type"] == "act" and r["step"] == "stop"]
    assert sorted(r["host"] for r in stops) == sorted(planned)
    checked = [r for r in rs if r["type"] == "act" and r["step"] == "check"]
    assert f"!{SLOW}" in checked[0]["argv"][checked[0]["argv"].index("--limit") + 1]
    assert checked[1]["verdict"] == "go" and sorted(checked[1]["hosts"]) == sorted(
        set(planned) - {SLOW} | {spare})
    # The watch followed the new job: a second start, on the new plan's hosts, its marker.
    starts = [r for r in rs if r["type"] == "start"]
    assert len(starts) == 2 and sorted(starts[1]["hosts"]) == sorted(checked[1]["hosts"])
    launched = [r for r in rs if r["type"] == "act" and r["step"] == "launch"][0]
    assert starts[1]["marker"] == launched["marker"] != starts[0]["marker"]
    assert launch.returncode != 0  # the first launch saw its job stopped
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_watch")) == {}

