"""PS jobs measured as PS jobs, on the plan they will run: each server host's fan-in from its
trainers' hosts, and the PS round (a short real async PS job on Paddle 2.6.2 through the
plan's own launcher commands), healthy and with a fault planted on one host."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.cluster

HOSTS = ["good1", "good2", "good3", "good4"]
FAST = ("--iperf-seconds", "1")
# Servers pinned on good1 and good2 by the inventory's roles, trainers on good2-4: good1
# receives from 3 trainer hosts at once, good2 from the 2 that are not itself.
ROLES = {"good1": {"roles": ["server"]}, "good2": {"roles": ["server", "worker"]},
         "good3": {"roles": ["worker"]}, "good4": {"roles": ["worker"]}}
SHAPE = "mode: ps\nserver_num: 2\ntrainer_num: 3\n"


def traces(cluster, hosts):
    """What a PS round or a fan-in left running or lying on the hosts (there must be none)."""
    return cluster.left_on(hosts, ("iperf3", ".preflight-ps-"), ".preflight-ps-")


def ps_check(cluster, name, python=None):
    inv = cluster.inventory(f"{name}.yaml", HOSTS, python=python or cluster.paddle_b,
                            overrides=ROLES)
    policy = cluster.policy(f"{name}.policy.yaml", SHAPE)
    return cluster.preflight("check", "-i", inv, "--policy", policy, *FAST, network=True,
                             timeout=400)


def test_a_healthy_ps_plan_measures_its_fan_in_and_its_round(cluster):
    run = ps_check(cluster, "ps-healthy")
    plan = run.report["plan"]
    assert sorted(e["host"] for e in plan["servers"]) == ["good1", "good2"], run.stdout
    fanin = {f["receiver"]: f["runs"] for f in run.report["network"]["fanin"]}
    assert {h: sorted(r) for h, r in fanin.items()} == {
        "good1": ["good2", "good3", "good4"], "good2": ["good3", "good4"]}
    assert all(r["received_bps"] and not r["error"] for runs in fanin.values()
               for r in runs.values()), fanin
    [passing] = run.findings("ps-fanin", "pass")
    assert sorted(passing["hosts"]) == ["good1", "good2"], run.stdout
    # The PS round ran the plan's own job: every trainer stepped, every server served.
    ps = run.report["network"]["ps"]
    assert ps["error"] is None, ps
    assert sorted(t["host"] for t in ps["trainers"]) == ["good2", "good3", "good4"]
    assert all(t["steps"] > 0 for t in ps["trainers"]), ps
    assert sorted(s["host"] for s in ps["servers"]) == ["good1", "good2"], ps
    assert all(s["cpu_s"] > 0 for s in ps["servers"]), ps
    assert ps["roles"] == {"good1": "server", "good2": "server and trainer",
                           "good3": "trainer", "good4": "trainer"}
    [passed] = run.findings("ps-round", "pass")
    assert sorted(passed["hosts"]) == HOSTS and "steps/s median" in passed["message"]
    assert run.report["network"]["allreduce"] is None  # a PS job runs no collective
    assert run.rc == 0, run.stdout + run.stderr
    assert not traces(cluster, HOSTS)


def test_a_server_beside_a_trainer_short_of_cpu_holds_every_trainer(cluster):
    # good2 serves and trains under a quota of 60 % of the machine's cores: cpu-cores warns
    # (it stays in the plan so far), and the round names it as the server every trainer
    # waits on.
    cores = 0.6 * (os.cpu_count() or 1)
    cluster.tb.limit_cpu("good2", cores)
    try:
        run = ps_check(cluster, "ps-starved-server")
    finally:
        cluster.tb.limit_cpu("good2", float(os.cpu_count() or 1))
    bad = [f for f in run.findings("ps-round") if f["status"] not in ("pass",)]
    assert [f["hosts"] for f in bad] == [["good2"]], run.stdout
    assert bad[0]["status"] == "fail" and bad[0]["message"].startswith(
        "good2 (PS server and trainer): holds every trainer: "), bad[0]["message"]
    assert "short of CPU" in bad[0]["message"] or "throttled" in bad[0]["message"]
    # The plan leaves it out, saying why; the job still fits the others (the shape is sized
    # by the policy): GO on them, good2 named.
    excluded = run.report["plan"]["excluded"]
    assert list(excluded) == ["good2"] and excluded["good2"][0].startswith("ps-round: ")
    assert "good2" not in {n["host"] for n in run.report["plan"]["nodes"]}
    assert run.rc == 0, run.stdout
    assert not traces(cluster, HOSTS)


def test_a_build_without_the_ps_core_cannot_run_the_round_and_says_why(cluster):
    run = ps_check(cluster, "ps-331", python=cluster.paddle_a)
    [f] = run.findings("ps-round", "could-not-check")
    assert "Paddle 3.3.1" in f["message"] and "no parameter-server core" in f["message"]
    assert run.report["network"]["ps"] is None
    assert run.rc == 1  # stack-compat fails every host: no PS job can run on them
    assert not traces(cluster, HOSTS)
