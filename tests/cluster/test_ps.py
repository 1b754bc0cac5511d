"""PS jobs measured as PS jobs, on the plan they will run: each server host's fan-in from its
trainers' hosts, and the PS round (a short real async PS job on Paddle 2.6.2 through the
plan's own launcher commands), healthy and with a fault planted on one host."""

from __future__ import annotations

import pytest

from preflight.testing import testbed

pytestmark = pytest.mark.cluster

HOSTS = ["good1", "good2", "good3", "good4"]
# A short round, bounded well below its default: a hang costs the suite this, twice at most.
FAST = ("--iperf-seconds", "1", "--iperf-warmup", "0", "--ps-seconds", "2", "--ps-timeout", "90")
# Servers pinned on good1 and good2 by the inventory's roles, trainers on good2-4: good1
# receives from 3 trainer hosts at once, good2 from the 2 that are not itself.
ROLES = {"good1": {"roles": ["server"]}, "good2": {"roles": ["server", "worker"]},
         "good3": {"roles": ["worker"]}, "good4": {"roles": ["worker"]}}
SHAPE = "mode: ps\nserver_num: 2\ntrainer_num: 3\n"


def traces(cluster, hosts):
    """What a PS round or a fan-in left running or lying on the hosts (there must be none)."""
    return cluster.left_on(hosts, ("iperf3", ".preflight-ps-"), ".preflight-ps-")


def ps_check(cluster, name, python=None, shape=SHAPE):
    inv = cluster.inventory(f"{name}.yaml", HOSTS, python=python or cluster.paddle_b,
                            overrides=ROLES)
    policy = cluster.policy(f"{name}.policy.yaml", shape)
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
    # Each step's time off the CPU (its pulls and pushes) is part of the step, never more.
    assert all(0 < t["wait_s"] <= t["seconds"] for t in ps["trainers"]), ps
    assert sorted(s["host"] for s in ps["servers"]) == ["good1", "good2"], ps
    assert all(s["cpu_s"] > 0 for s in ps["servers"]), ps
    assert ps["roles"] == {"good1": "server", "good2": "server and trainer",
                           "good3": "trainer", "good4": "trainer"}
    [passed] = run.findings("ps-round", "pass")
    assert sorted(passed["hosts"]) == HOSTS and "steps/s median" in passed["message"]
    assert run.report["network"]["allreduce"] is None  # a PS job runs no collective
    assert run.rc == 0, run.stdout + run.stderr
    assert not traces(cluster, HOSTS)


def test_the_round_trains_in_the_policys_geo_mode(cluster):
    # One server and two trainers: on a lane of one CPU, five GEO processes starting at once
    # were seen to hang at "create c2c connection done" in the whole suite (twice, a retry
    # included), never alone: Paddle's start-up under starvation, not the mode under test.
    run = ps_check(cluster, "ps-geo", shape="mode: ps\nserver_num: 1\ntrainer_num: 2\n"
                                            "ps_mode: geo\n")
    ps = run.report["network"]["ps"]
    assert ps["mode"] == "geo" and not ps["failed"], ps
    assert len(ps["trainers"]) == 2 and all(t["steps"] > 0 for t in ps["trainers"]), ps
    [passed] = run.findings("ps-round", "pass")
    assert passed["message"].startswith("PS round (geo, 2 s): 2 trainer(s) at ")
    assert run.rc == 0, run.stdout
    assert not traces(cluster, HOSTS)


def test_a_server_beside_a_trainer_short_of_cpu_holds_every_trainer(cluster):
    # good2 serves and trains under a quota of 60 % of the machine's cores: cpu-cores warns
    # (it stays in the plan so far), and the round names it as the server every trainer
    # waits on.
    cores = 0.6 * testbed.usable_cpus()
    cluster.tb.limit_cpu("good2", cores)
    try:
        run = ps_check(cluster, "ps-starved-server")
    finally:
        cluster.tb.unlimit_cpu("good2")
    bad = [f for f in run.findings("ps-round") if f["status"] not in ("pass",)]
    assert [f["hosts"] for f in bad] == [["good2"]], run.stdout
    assert bad[0]["status"] == "fail" and bad[0]["message"].startswith(
        "good2 (PS server and trainer): holds every trainer: "), bad[0]["message"]
    assert "short of CPU" in bad[0]["message"] or "throttled" in bad[0]["message"]
    # The plan leaves it out, saying why. Its second server has no other host the inventory
    # lets serve (good1 has the first): NO-GO naming good2 and its role, not two servers
    # stacked on good1.
    plan = run.report["plan"]
    assert list(plan["excluded"]) == ["good2"] and \
        plan["excluded"]["good2"][0].startswith("ps-round: ")
    assert "good2" not in {n["host"] for n in plan["nodes"]}
    assert [e["host"] for e in plan["servers"]] == ["good1"] and not plan["fits"]
    assert plan["lacks"][0].startswith("server 2 of 2: no other host may serve: good2 (may "
                                       "serve) is left out: ps-round: "), plan["lacks"]
    assert run.rc == 1, run.stdout
    assert not traces(cluster, HOSTS)


def test_a_build_without_the_ps_core_cannot_run_the_round_and_says_why(cluster):
    run = ps_check(cluster, "ps-331", python=cluster.paddle_a)
    [f] = run.findings("ps-round", "could-not-check")
    assert "Paddle 3.3.1" in f["message"] and "no parameter-server core" in f["message"]
    assert run.report["network"]["ps"] is None
    assert run.rc == 1  # stack-compat fails every host: no PS job can run on them
    assert not traces(cluster, HOSTS)


def test_a_firewalled_server_port_is_named_on_its_host_before_the_round(cluster):
    # good1's firewall lets SSH and iperf3 through and drops the job's ports: every local
    # check passes, and the PS job would hang at its trainers' first push.
    cluster.tb.firewall("good1", "6070:6077")
    try:
        run = ps_check(cluster, "ps-firewalled")
    finally:
        cluster.tb.unfirewall("good1")
    bad = [f for f in run.report["findings"] if f["status"] != "pass"
           and not f["check"].startswith("plan")]
    assert [(f["check"], f["hosts"]) for f in bad] == [("ports", ["good1"])], run.stdout
    msg = bad[0]["message"]
    assert msg.startswith("good1 (server): its job ports 6070") and "good2, good3, good4" in \
        msg and "timed out" in msg and "firewall" in msg, msg
    reach = {r["host"]: r for r in run.report["network"]["reach"]}
    assert sorted(reach["good1"]["unreached"]) == ["good2", "good3", "good4"]
    assert not any(reach[h]["unreached"] for h in ("good2", "good3", "good4")), reach
    # The round ran without it (the plan left it out first) and hung on nobody.
    assert "good1" in run.report["plan"]["excluded"]
    ps = run.report["network"]["ps"]
    assert ps is not None and "good1" not in ps["hosts"] and not ps["failed"], ps
    assert not traces(cluster, HOSTS)


def test_a_trainer_whose_protobuf_kills_the_ps_job_is_named_alone(cluster):
    # good3's training environment has protobuf 7: Paddle 2.6.2's fleet dies setting a_sync
    # with a TypeError that names neither protobuf nor the host's environment.
    roles = {h: dict(r) for h, r in ROLES.items()}
    roles["good3"]["python"] = cluster.paddle_b.replace("paddle-2.6.2", "paddle-2.6.2-protobuf7")
    inv = cluster.inventory("ps-protobuf.yaml", HOSTS, python=cluster.paddle_b, overrides=roles)
    policy = cluster.policy("ps-protobuf.policy.yaml", SHAPE)
    run = cluster.preflight("check", "-i", inv, "--policy", policy, *FAST, network=True,
                            timeout=400)
    bad = [f for f in run.report["findings"] if f["status"] != "pass"
           and not f["check"].startswith("plan")]
    assert [(f["check"], f["hosts"]) for f in bad] == [("stack-compat", ["good3"])], run.stdout
    assert "protobuf 7." in bad[0]["message"] and "install protobuf<7" in bad[0]["message"]
    # Left out before the round, which runs on the others and fails nowhere.
    assert run.report["plan"]["excluded"]["good3"][0].startswith("stack-compat: ")
    ps = run.report["network"]["ps"]
    assert ps is not None and "good3" not in ps["hosts"] and not ps["failed"], ps
    assert not traces(cluster, HOSTS)


def test_a_trainer_under_a_quota_is_left_out_and_its_place_taken(cluster):
    # good3, a trainer by the inventory's roles, gets a fifth of the machine's cores: cpu-cores
    # names it, and the plan runs its trainer on a host that has the cores.
    cluster.tb.limit_cpu("good3", 0.2 * testbed.usable_cpus())
    try:
        run = ps_check(cluster, "ps-starved-trainer")
    finally:
        cluster.tb.unlimit_cpu("good3")
    bad = [f for f in run.report["findings"] if f["status"] != "pass"]
    assert [(f["check"], f["hosts"], f["status"]) for f in bad] == [
        ("cpu-cores", ["good3"], "fail")], run.stdout
    assert "quota" in bad[0]["message"]
    plan = run.report["plan"]
    assert list(plan["excluded"]) == ["good3"] and len(plan["workers"]) == 3
    ps = run.report["network"]["ps"]
    assert "good3" not in ps["hosts"] and len(ps["trainers"]) == 3 and not ps["failed"], ps
    assert run.rc == 0, run.stdout
    assert not traces(cluster, HOSTS)


def test_a_pinned_server_on_a_slow_link_is_no_go_naming_it_not_stacked_on_another(cluster):
    # The inventory pins the servers on slow (a 100 Mbit/s link, a tenth of the others') and
    # good2: the link tests name slow; the plan does not put both servers on good2 (each
    # would get half its NIC, and the pin was the user's word): NO-GO naming slow and its
    # role. What slow would cost as a server is said in the job's own terms, from the round's
    # small model, with the step size at which it would cost 2x.
    hosts = ["slow", "good2", "good3", "good4"]
    roles = {("slow" if h == "good1" else h): r for h, r in ROLES.items()}
    inv = cluster.inventory("ps-slow-link.yaml", hosts, python=cluster.paddle_b, overrides=roles)
    policy = cluster.policy("ps-slow-link.policy.yaml", SHAPE)
    run = cluster.preflight("check", "-i", inv, "--policy", policy, *FAST, network=True,
                            timeout=400)
    bad = [f for f in run.report["findings"] if f["status"] != "pass"]
    assert [(f["check"], f["hosts"]) for f in bad] == [("bandwidth", ["slow"])], run.stdout
    plan = run.report["plan"]
    assert list(plan["excluded"]) == ["slow"]
    assert [e["host"] for e in plan["servers"]] == ["good2"] and not plan["fits"]
    assert plan["lacks"][0].startswith("server 2 of 2: no other host may serve: slow (pinned "
                                       "as a server) is left out: bandwidth: "), plan["lacks"]
    ps = run.report["network"]["ps"]
    assert "slow" not in ps["hosts"] and not ps["failed"] and ps["trainers"], ps
    # Its cost is a step's with a server there (not an all-reduce's, which a PS job never
    # runs), from what the round's steps exchanged and the links measured.
    cost = plan["costs"]["slow"]
    assert cost["what"] == "ps-step" and cost["with_s"] >= cost["without_s"] > 0, cost
    assert cost["double_at"] and cost["double_at"] > cost["bytes"], cost  # a small model
    assert "with a server on it, ~" in run.stdout and "with the PS round's own small model" \
        in run.stdout and "a step with a server would cost 2x" in run.stdout, run.stdout
    assert run.rc == 1, run.stdout
    assert "server 2 of 2: no other host may serve: slow" in run.stdout.splitlines()[-1]
    assert not traces(cluster, hosts)


def test_a_server_gets_a_host_of_its_own_while_one_is_free(cluster):
    # Only good1 may serve (the inventory's roles); 2 trainers for 3 other hosts: the trainers
    # go elsewhere, not beside the server, and the round measures that plan.
    roles = {"good1": {"roles": ["server", "worker"]},
             **{h: {"roles": ["worker"]} for h in ("good2", "good3", "good4")}}
    inv = cluster.inventory("ps-spare.yaml", HOSTS, python=cluster.paddle_b, overrides=roles)
    policy = cluster.policy("ps-spare.policy.yaml", "mode: ps\nserver_num: 1\ntrainer_num: 2\n")
    run = cluster.preflight("check", "-i", inv, "--policy", policy, *FAST, network=True,
                            timeout=400)
    plan = run.report["plan"]
    assert [e["host"] for e in plan["servers"]] == ["good1"], run.stdout
    assert "good1" not in {e["host"] for e in plan["workers"]}
    assert len(plan["workers"]) == 2 and len(plan["excluded"]) == 1
    ps = run.report["network"]["ps"]
    assert ps["roles"]["good1"] == "server" and not ps["failed"], ps
    assert run.rc == 0, run.stdout
    assert not traces(cluster, HOSTS)
