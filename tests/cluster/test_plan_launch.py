"""The plan run for real: a PS job (Paddle 2.6.2, async, CPU) through `preflight launch` and a
collective gloo job (Paddle 3.3.1) through the emitted scripts, on the hosts the plan chose,
with a bad host left out that must run nothing; and a failing rank that stops the job."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from jobscripts import PS_FLEET, TRAIN_GLOO

pytestmark = pytest.mark.cluster

TRAIN_PS = """\
import os, socket
role = os.environ.get("TRAINING_ROLE", "?")
open("/root/ran-" + role, "a").write(socket.gethostname() + "\\n")
""" + PS_FLEET + """\
    open("/root/done-trainer-%d" % fleet.worker_index(), "w").write("20 steps\\n")
print("finished as", role, flush=True)
"""

FAIL_EARLY = "import sys\nprint('bad input shard', flush=True)\nsys.exit(3)\n"

PS_JOB = "mode: ps\nserver_num: 1\ntrainer_num: 2\n"


def job_traces(cluster, hosts):
    """Returns the job's processes still running on each host (there must be none)."""
    return cluster.left_on(hosts, ("paddle.distributed.launch", "train_"))


def clean(cluster, hosts, script, text):
    """Removes the markers of earlier jobs and gives every host the training script."""
    for name in hosts:
        root = cluster.private(name, "/root/")
        for f in os.listdir(root):
            if f.startswith(("ran-", "done-")):
                os.unlink(os.path.join(root, f))
        cluster.tb.write_file(name, script, text)


def ran(cluster, name):
    root = cluster.private(name, "/root/")
    return sorted(f for f in os.listdir(root) if f.startswith(("ran-", "done-")))


def test_ps_job_runs_on_the_plan_hosts_and_the_bad_host_runs_nothing(cluster):
    hosts = ["good1", "good2", "good3", "starved"]
    clean(cluster, hosts, "/root/train_ps.py", TRAIN_PS)
    policy = cluster.policy("ps-job.yaml", PS_JOB)  # the shape from a policy file
    inv = cluster.inventory("ps-plan.yaml", hosts, python=cluster.paddle_b)
    run = cluster.preflight("check", "-i", inv, "--policy", policy)
    # starved (a quarter core) fails cpu-cores; the sized job fits without it: GO.
    assert run.rc == 0, run.stdout + run.stderr
    plan = run.report["plan"]
    assert plan["fits"] and plan["mode"] == "ps"
    assert [w["host"] for w in plan["workers"]] == ["good1", "good2"]
    assert [s["host"] for s in plan["servers"]] == ["good3"]  # the host without a trainer
    assert list(plan["excluded"]) == ["starved"]
    assert plan["excluded"]["starved"][0].startswith("cpu-cores: starved: 0.25 effective cores")
    servers = plan["servers"][0]["endpoint"]
    for node in plan["nodes"]:
        assert node["argv"][3:7] == ["--servers", servers, "--trainers",
                                     ",".join(w["endpoint"] for w in plan["workers"])]
        assert node["command"].startswith("GLOO_SOCKET_IFNAME=eth0 ")
    assert "PLAN ps: 1 servers, 2 trainers" in run.stdout
    assert "left out starved: cpu-cores" in run.stdout

    report = os.path.join(cluster.tb.base, "ps-report.json")
    with open(report, "w") as fh:
        json.dump(run.report, fh)
    launched = cluster.cli("launch", "--plan", report, "--timeout", "150", "--",
                           "train_ps.py", timeout=200)
    assert launched.rc == 0, launched.stdout + launched.stderr
    assert ran(cluster, "good1") == ["done-trainer-0", "ran-TRAINER"]
    assert ran(cluster, "good2") == ["done-trainer-1", "ran-TRAINER"]
    assert ran(cluster, "good3") == ["ran-PSERVER"]
    assert ran(cluster, "starved") == []  # left out: it ran nothing
    assert any(line.startswith("good3 ") for line in launched.stdout.splitlines())
    assert job_traces(cluster, hosts) == {}


def test_collective_job_runs_from_the_emitted_scripts(cluster):
    hosts = ["good1", "good2", "good3", "badrank"]
    clean(cluster, hosts, "/root/train_gloo.py", TRAIN_GLOO)
    out_dir = os.path.join(cluster.tb.base, "launch-collective")
    inv = cluster.inventory("collective-plan.yaml", hosts)
    run = cluster.preflight("check", "-i", inv, "--nnodes", "3", "--emit-launch", out_dir)
    # badrank's login shell points gloo at an interface it lacks (env fails it): left out.
    assert run.rc == 0, run.stdout + run.stderr
    plan = run.report["plan"]
    assert [n["host"] for n in plan["nodes"]] == ["good1", "good2", "good3"]
    assert plan["master"].startswith(cluster.tb.hosts["good1"].address + ":")
    assert plan["excluded"]["badrank"][0].startswith("env: badrank: GLOO_SOCKET_IFNAME")
    assert sorted(os.listdir(out_dir)) == sorted(f"{h}.{x}" for h in hosts[:3]
                                                 for x in ("env", "sh"))
    # Hand the scripts to the hosts as a scheduler would, and run them over plain ssh.
    procs = []
    for name in hosts[:3]:
        for ext in ("env", "sh"):
            with open(os.path.join(out_dir, f"{name}.{ext}")) as fh:
                cluster.tb.write_file(name, f"/root/job/{name}.{ext}", fh.read())
        ssh = ["ssh", "-i", cluster.tb.identity, "-o",
               f"UserKnownHostsFile={cluster.tb.known_hosts}", "-o", "StrictHostKeyChecking=yes",
               "-o", "BatchMode=yes",
               f"root@{cluster.tb.hosts[name].address}", f"sh job/{name}.sh train_gloo.py"]
        procs.append(subprocess.Popen(cluster.tb.client_cmd(ssh), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=150)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0, 0], "\n".join(outs)
    for rank, name in enumerate(hosts[:3]):
        assert ran(cluster, name) == [f"done-rank-{rank}", "ran-collective"]
    assert ran(cluster, "badrank") == []
    assert job_traces(cluster, hosts) == {}


def test_a_failing_rank_stops_the_job_on_every_host(cluster):
    hosts = ["good1", "good2", "good3"]
    clean(cluster, hosts, "/root/train_gloo.py", TRAIN_GLOO)
    cluster.tb.write_file("good2", "/root/train_gloo.py", FAIL_EARLY)
    inv = cluster.inventory("collective-fail.yaml", hosts)
    run = cluster.preflight("check", "-i", inv)
    assert run.rc == 0, run.stdout + run.stderr
    report = os.path.join(cluster.tb.base, "collective-report.json")
    with open(report, "w") as fh:
        json.dump(run.report, fh)
    limit = 150
    start = time.monotonic()
    launched = cluster.cli("launch", "--plan", report, "--timeout", str(limit), "--",
                           "train_gloo.py", timeout=limit + 50)
    assert launched.rc == 1, launched.stdout + launched.stderr
    assert "preflight launch: good2 failed (exit" in launched.stderr
    assert "good2 | bad input shard" in launched.stdout  # streamed under its host name
    assert time.monotonic() - start < limit  # stopped by good2's failure, not its time limit
    # good1 and good3 were waiting for good2 at the rendezvous: stopped, nothing left.
    assert job_traces(cluster, hosts) == {}
    assert not any(f.startswith("done-") for h in hosts for f in ran(cluster, h))
