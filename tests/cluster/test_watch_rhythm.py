"""`preflight watch --act` on a real job in a real job's rhythm, as an operator runs it:
`preflight check --nnodes 3` (GO, the fourth host a spare), `preflight launch` of the plan and
at once `preflight watch --plan --act`. For ten minutes the healthy job shows its phases:
rank 0 evaluates alone and saves checkpoints while its peers wait (each under gloo's 30 s
collective timeout), and every rank saves its shard of a sharded checkpoint for longer than
the 60 s hang bar. Nothing fails, nobody is named and nothing is done at any judgement; the
phases are said. Then a CPU quota is planted on one host: named, and named on through rank
0's phases (which hide it: every rank waits for rank 0 then, it too), acted on once named for
--act-after (within a window of that), the job launched again on the spare.

It runs beside the cluster stage's lanes (scripts/test.sh), in a process of its own: its
job sleeps most of its time. Healthy, it is checked for ten minutes and on until the lanes
are done, under whatever they take of the CPUs its hosts share (one kernel), which the watch
must not take for one host's fault; the quota is planted once they are done (LANES_DONE)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import LINK_RATE, Cluster, require_testbed
from jobscripts import TRAIN_RHYTHM, TRAIN_RHYTHM_PATH
from watchtools import (
    cli_popen,
    held,
    records,
    records_so_far,
    relaunched_on,
    steps_logged,
    stop_watched,
)

from preflight.testing import testbed

pytestmark = [pytest.mark.cluster, pytest.mark.long]

HOSTS = ["rhythm1", "rhythm2", "rhythm3", "rhythm4"]
HEALTHY_S = 600  # watched with --act, healthy, at least this long
PHASE = (45, 18)  # every 45 s rank 0 evaluates or saves a checkpoint (by turns) for 18 s
SHARD = (300, 70)  # every rank saves its shard at 300 s, for 70 s (past the hang bar)
RUN_S = 4000  # the job's own end: past the test's (the test stops it)
# Where scripts/test.sh runs it beside the lanes, it names a file it makes once the cluster
# stage is over: the quota is planted only then (the job stays healthy, and is checked, until
# it is, for at most LANES_WAIT_S). The lanes' load is each lane's CPU's, and every simulated
# host here shares them (one kernel): under a 32-host all-reduce, ranks on one CPU starve
# while those on the other run, which no real cluster's hosts do; planted into that, the
# 0.02-core quota was named, then not told apart from its starved peers for minutes.
LANES_DONE = os.environ.get("PREFLIGHT_LANES_DONE")
LANES_WAIT_S = 1800
ACT_AFTER_S = 60
# The quota planted on the whole host: a fiftieth of a core, where a rank computes about
# 10 ms a step (its steps then take about half a second more).
QUOTA = 0.02
# From the fault's first naming to its action: --act-after, and at most the watch's window
# (15 s) and two judgements (5 s each) more.
ACT_SLACK_S = 25


def _bad(rs: list[dict[str, Any]]) -> list[str]:
    """What must not happen to a healthy job: a finding that fails or cannot judge, or an
    action of any kind (a wait before one included)."""
    return [f"{r['type']}: {r.get('check') or r.get('step')}: {r.get('message') or r}"
            for r in rs if r["type"] == "act"
            or (r["type"] == "finding" and r["status"] not in ("pass", "skip", "warn"))]


def _timeline(rs: list[dict[str, Any]], planted: float) -> str:
    """What the watch said and did from the plant on, a line each with its time after it: a
    late action then shows what broke the count (a host cleared, a judgement it could not
    make, a phase)."""
    return "\n".join(
        f"+{r['at'] - planted:6.1f} {r['type']} {r.get('check') or r.get('step')} "
        f"{r.get('status', '')} {','.join(r.get('hosts', []))}: "
        f"{(r.get('message') or r.get('text') or '')[:110]}"
        for r in rs if r.get("at", 0) >= planted and r["type"] in ("finding", "cleared", "act"))


def _unjudged_s(rs: list[dict[str, Any]], host: str, t0: float, t1: float) -> float:
    """The seconds between t0 and t1 in which the watch said it could not judge host (its
    "watch" finding open on it, from its record to its clearing)."""
    spans: list[tuple[float, float]] = []
    since: float | None = None
    for r in rs:
        if r.get("check") != "watch" or host not in r.get("hosts", []):
            continue
        if r["type"] == "finding" and r["status"] == "could-not-check" and since is None:
            since = r["at"]
        elif r["type"] == "cleared" and since is not None:
            spans.append((since, r["at"]))
            since = None
    if since is not None:
        spans.append((since, t1))
    return sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Four healthy hosts of their own: this test runs beside the lanes, where a cluster of
    every fault would take the CPUs they need while it is built."""
    require_testbed()
    tb = testbed.Testbed(len(HOSTS), names=HOSTS)
    try:
        for name in HOSTS:
            tb.throttle(name, LINK_RATE)
        yield Cluster(tb)
    finally:
        tb.close()


@pytest.mark.timeout(3600)
def test_a_job_in_its_rhythm_is_watched_ten_minutes_with_act_and_only_a_planted_fault_acted_on(
        cluster):
    """The module's docstring says what it asserts.

    Its time: ten minutes of a healthy job watched with --act are what it proves (phases every
    45 s, a sharded save at 300 s), then the quota's naming, --act-after (60 s) and the
    relaunch on the spare; it runs beside the lanes, in a process of its own, its job asleep
    most of the time, so that it costs the suite no lane."""
    for name in HOSTS:
        cluster.tb.write_file(name, TRAIN_RHYTHM_PATH, TRAIN_RHYTHM)
        log = cluster.private(name, "/root/log/workerlog.0")
        if os.path.exists(log):
            os.unlink(log)
    report = os.path.join(cluster.tb.base, "rhythm-report.json")
    run = cluster.cli("check", "-i", cluster.inventory("rhythm.yaml", HOSTS), "--nnodes", "3",
                      "--no-network-tests", "--json", report, "--no-progress")
    assert run.rc == 0, run.stdout + run.stderr
    with open(report) as fh:
        planned = [n["host"] for n in json.load(fh)["plan"]["nodes"]]
    spare = next(h for h in HOSTS if h not in planned)
    victim = planned[-1]  # not rank 0's host (the plan's first: the master)
    rank0 = planned[0]
    args = [str(x) for x in (RUN_S, *PHASE, *SHARD)]
    launch = cli_popen(cluster, "launch", "--plan", report, "--", "train_rhythm.py", *args,
                       quiet=True)
    wlog = os.path.join(cluster.tb.base, "watch-rhythm.jsonl")
    # At once, as docs/watch.md shows: the watch waits for the launch's record.
    watch = cli_popen(cluster, "watch", "--plan", report, "--log", wlog, "--act",
                      "--act-after", f"{ACT_AFTER_S}s", "--for", "3400")
    relaunch_pid = None
    planted = stepping = healthy_s = 0.0
    try:
        end = time.monotonic() + 180
        while time.monotonic() < end and not all(steps_logged(cluster, h) >= 3 for h in planned):
            assert launch.poll() is None and watch.poll() is None, "launch or watch ended"
            time.sleep(1)
        assert all(steps_logged(cluster, h) >= 3 for h in planned), "the job did not start stepping"
        # Healthy for HEALTHY_S: checked as it goes, so that a failure ends the test early.
        start = time.monotonic()
        end = start + HEALTHY_S
        while time.monotonic() < end or (
                LANES_DONE and not os.path.exists(LANES_DONE)
                and time.monotonic() < start + HEALTHY_S + LANES_WAIT_S):
            time.sleep(5)
            assert launch.poll() is None, "the job ended while healthy (gloo's timeout?)"
            assert watch.poll() is None, watch.communicate()
            bad = _bad(records_so_far(wlog))
            assert not bad, bad
        healthy_s = time.monotonic() - start
        planted = time.time()
        cluster.tb.limit_cpu(victim, QUOTA)
        stepping, relaunch_pid, acts = relaunched_on(cluster, watch, wlog, spare, 400)
        assert steps_logged(cluster, spare) >= 3, (acts, _timeline(records_so_far(wlog),
                                                                   planted))
    finally:
        cluster.tb.unlimit_cpu(victim)
        out, err = stop_watched(watch, relaunch_pid, launch)
    rs = records(wlog)
    before = [r for r in rs if r.get("at", 0) < planted]
    assert not _bad(before), _bad(before)
    # Findings as the log keeps them: once said ("finding"), and as last said once they no
    # longer hold ("cleared").
    found = [r for r in before if r["type"] in ("finding", "cleared")]
    # Its phases said, as passes: rank 0's evaluations and checkpoints on its host, and the
    # sharded save of every rank with no step past the hang bar.
    kinds = {r.get("phase") for r in found if r["check"] == "phase"
             and r["hosts"] == [rank0]}
    sharded = [r for r in found if r["check"] == "phase" and len(r["hosts"]) == 3]
    named = [r for r in rs if held(r) and r.get("at", 0) >= planted]
    acts = [r for r in rs if r["type"] == "act" and r["step"] != "skip"]
    drained = next((r["at"] for r in acts if r["step"] == "drain"), planted)
    # The figures, printed first (the benchmarks quote them): a failure below keeps them.
    print(f"\nthe healthy job: {len(found)} findings over {healthy_s:.0f} s, rank 0's phases said "
          f"as {sorted(k for k in kinds if k)}, the sharded save as "
          f"{max((r.get('quiet_s', 0) for r in sharded), default=0):.0f} s with no step; after "
          f"the quota: named {(named[0]['at'] if named else planted) - planted:.1f} s, acted "
          f"on (its drain) {drained - planted:.1f} s (--act-after {ACT_AFTER_S} s), the job "
          f"ran again on the spare {stepping - planted:.1f} s; acts: "
          + "; ".join(f"{r['step']} {r.get('text', '')[:120]}" for r in acts))
    assert {"evaluations", "checkpoints"} <= kinds, (kinds, out + err)
    assert sharded and "every one of 3 ranks writes files" in sharded[0]["message"], out + err
    assert max(r.get("quiet_s", 0) for r in sharded) > 60, sharded[-1]
    # The fault: its host named, acted on once, on the spare.
    assert named and named[0]["check"] == "straggler" and named[0]["hosts"] == [victim], \
        out + err
    # Acted on in time: the count never started again at rank 0's phases. Where the watch
    # could not judge the host (its samples late: the machine loaded by the lanes beside),
    # the count paused, by design: that time is the watch's to add, and it said it.
    paused = _unjudged_s(rs, victim, named[0]["at"], drained)
    assert drained - named[0]["at"] <= ACT_AFTER_S + ACT_SLACK_S + paused, (
        drained - named[0]["at"], paused, _timeline(rs, planted))
    # What it did (a note of what it would not act on, "skip", is no action).
    steps = [r["step"] for r in acts]
    assert steps == ["wait", "drain", "stop", "stop", "stop", "check", "check", "launch"], \
        (steps, out + err)
    # Each host's stop said what it stopped (a host under a quota too: its stop is one scan).
    stops = [r["text"] for r in acts if r["step"] == "stop"]
    assert all(t.endswith("process(es) stopped") for t in stops), stops
    checked = [r for r in acts if r["step"] == "check"]
    assert checked[1]["verdict"] == "go" and sorted(checked[1]["hosts"]) == sorted(
        set(planned) - {victim} | {spare})
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_rhythm")) == {}

