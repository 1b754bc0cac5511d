"""The plan where the job runs in a container: each host's launcher runs in the job's
container, started as the job's, the launcher told its --host (inside a container the
hostname does not resolve, and the launcher waits on "master not ready" without it); the
report carries it, and `preflight launch` runs it and finds its processes to stop them."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest
from support import cluster, gpu, paddle, report_doc, same

from preflight.act.launch import LaunchOptions, host_command, load_plan
from preflight.common.containercmd import node_command
from preflight.config.errors import InputError
from preflight.judge import judge, run_checks
from preflight.model.cluster import Cluster
from preflight.model.container import ContainerSpec
from preflight.model.policy import Mode, Policy
from preflight.placement.planner import plan

SPEC = ContainerSpec("podman", image="localhost/paddle:3.3.1", network="host",
                     shm_size="16g", ulimits=(("memlock", "-1"),))


def boxed_cluster(mode: Mode = "collective") -> Cluster:
    """Three CPU hosts whose job runs in SPEC's container."""
    c = cluster(**same(3, gpu=gpu(n=0), paddle=paddle(ps_core=True, compiled_with_cuda=False)))
    outs = tuple(replace(o, host=replace(o.host, container=SPEC)) for o in c.outcomes)
    return replace(c, outcomes=outs, policy=Policy(mode=mode))


@pytest.mark.parametrize("mode", ["collective", "ps"])
def test_every_host_runs_its_launcher_in_the_container_with_its_host(mode):
    c = boxed_cluster(mode)
    ips = {o.host.name: f"10.0.0.{i}" for i, o in enumerate(c.outcomes, 1)}
    p = plan(c, run_checks(c), ips)
    assert p.nodes and all(n.container == SPEC for n in p.nodes)
    for n in p.nodes:
        argv = shlex.split(node_command(n))
        assert argv[:3] == ["podman", "run", "--rm"] and "localhost/paddle:3.3.1" in argv
        assert ["--shm-size", "16g"] == argv[argv.index("--shm-size"):][:2]
        inside = argv[argv.index("localhost/paddle:3.3.1") + 1:]
        assert inside[0] == "env" and "paddle.distributed.launch" in inside
        assert inside[inside.index("--host") + 1] == ips[n.host]


def test_the_report_carries_the_container_and_launch_runs_it(tmp_path):
    c = boxed_cluster()
    ips = {o.host.name: f"10.0.0.{i}" for i, o in enumerate(c.outcomes, 1)}
    p = plan(c, run_checks(c), ips)
    doc = report_doc(c, judge(c, run_checks(c), p), p)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    nodes, _ = load_plan(str(path), ignore_verdict=True)
    assert [n.container for n in nodes] == [SPEC] * 3
    line = host_command(nodes[0], LaunchOptions(("train.py",), chdir="/work"), "tok12345")
    argv = shlex.split(shlex.split(line)[2].split("exec ", 2)[2])
    assert argv[:3] == ["env", "PREFLIGHT_LAUNCH=tok12345", "podman"]
    assert ["--name", "paddle-job-node01-tok12345"] == argv[argv.index("--name"):][:2]
    inside = argv[argv.index("localhost/paddle:3.3.1") + 1:]
    assert inside[:2] == ["env", "PREFLIGHT_LAUNCH=tok12345"]  # the marker, inside too
    assert inside[inside.index("sh"):][:4] == ["sh", "-c", 'cd "$0" || exit 97; exec "$@"',
                                               "/work"]
    assert inside[-1] == "train.py"


def test_a_container_in_a_report_is_read_as_the_inventory_would_read_it(tmp_path):
    doc = {"report_version": 1, "verdict": "go", "plan": {"nodes": [{
        "host": "n1", "argv": ["python3", "-m", "paddle.distributed.launch"], "env": {},
        "container": {"runtime": "docker", "image": "--privileged"}}]}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        load_plan(str(path))
    assert "field 'plan.nodes[0].container'" in str(e.value) and "option-like" in str(e.value)
