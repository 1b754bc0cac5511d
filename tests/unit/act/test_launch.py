"""`preflight launch`'s input: the host command it builds, plans read from reports, bad plans."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from preflight.act.launch import (
    LaunchOptions,
    host_command,
    load_plan,
    remove_command,
)
from preflight.config.errors import InputError
from preflight.model.container import ContainerSpec
from preflight.placement.launcher import collective_node


def test_host_command_carries_the_plan_env_and_marker():
    node = collective_node("n1", "10.0.0.1", "/opt/py 3/bin/python", 0, 2, 1,
                           "10.0.0.1:6767", [6070, 6071], (6070, 6071, 6767), "eth0")
    cmd = host_command(node, LaunchOptions(("train.py", "--lr", "0.1")), "tok")
    assert "PREFLIGHT_LAUNCH=tok PORT_RANGE=6070:6071 GLOO_SOCKET_IFNAME=eth0" in cmd
    assert "'\"'\"'/opt/py 3/bin/python'\"'\"' -m paddle.distributed.launch" in cmd
    assert node.command() == ("PORT_RANGE=6070:6071 GLOO_SOCKET_IFNAME=eth0 '/opt/py 3/bin/"
                             "python' -m paddle.distributed.launch --master 10.0.0.1:6767 "
                             "--nnodes 2 --rank 0 --nproc_per_node 1 --host 10.0.0.1")


@pytest.mark.parametrize("spec,removed", [
    (ContainerSpec("podman", image="img:1"),
     "podman rm --force --time 0 paddle-job-n1-abcdef12 >/dev/null 2>&1; true"),
    (ContainerSpec("docker", image="img:1"),
     "docker rm --force paddle-job-n1-abcdef12 >/dev/null 2>&1; true"),
    (ContainerSpec("docker", name="dev"), None),  # a running container is the user's own
    (ContainerSpec("apptainer", image="/img.sif"), None),  # nothing is left behind
    (None, None),
], ids=["podman", "docker", "running", "apptainer", "no-container"])
def test_a_stopped_jobs_container_is_removed_by_its_name(spec, removed):
    node = collective_node("n1", "10.0.0.1", "python3", 0, 1, 1, "10.0.0.1:6767", [6070],
                           (6070, 6767), "eth0")
    node = replace(node, container=spec)
    assert remove_command(node, "abcdef1234567890") == removed
    if removed:
        assert "--name paddle-job-n1-abcdef12 " in host_command(
            node, LaunchOptions(("t.py",)), "abcdef1234567890")


def report(tmp_path, **over):
    doc = {"report_version": 1, "verdict": "go", "reasons": [], "inventory": "/x/inv.yaml",
           "plan": {"nodes": [
        {"host": "n1", "address": "10.0.0.1", "rank": 0, "nproc": 1,
         "argv": ["python3", "-m", "paddle.distributed.launch", "--servers", "a:1"],
         "env": {"POD_IP": "10.0.0.1"}}]}}
    doc.update(over)
    p = tmp_path / "report.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_load_plan(tmp_path):
    nodes, inventory = load_plan(report(tmp_path))
    assert [n.host for n in nodes] == ["n1"] and inventory.inventory == "/x/inv.yaml"
    assert nodes[0].argv[3:] == ("--servers", "a:1")


@pytest.mark.parametrize("over,fragment", [
    ({"verdict": "no-go", "reasons": ["dead: refused"]},
     "field 'verdict': the report's verdict is 'no-go': dead: refused"),
    ({"plan": None}, "field 'plan': no plan in this report"),
    ({"plan": {"nodes": []}}, "field 'plan.nodes': the plan has no hosts"),
    ({"plan": {"nodes": [{"host": "n1", "argv": ["sh", "-c", "x"], "env": {}}]}},
     "field 'plan.nodes[0].argv'"),
    ({"plan": {"nodes": [{"host": "n1", "argv": ["p", "-m", "paddle.distributed.launch"],
                          "env": {"A": 1}}]}}, "field 'plan.nodes[0].env.A'"),
    ({"plan": {"nodes": [{"host": "n1", "argv": ["p", "-m", "paddle.distributed.launch"],
                          "env": {}, "rank": "first"}]}}, "field 'plan.nodes[0].rank'"),
    ({"plan": {"nodes": ["n1"]}}, "field 'plan.nodes[0]': not a report preflight can read: "
     "expected a mapping"),
    ({"plan": {"mode": "mesh", "nodes": [{"host": "n1", "env": {}, "argv": [
        "p", "-m", "paddle.distributed.launch"]}]}},
     "field 'plan.mode': not a report preflight can read: 'mesh' is not one of collective, ps"),
], ids=["no-go", "no-plan", "empty", "not-the-launcher", "env-type", "rank-type",
        "node-type", "mode"])
def test_bad_plans_are_one_line_errors(tmp_path, over, fragment):
    with pytest.raises(InputError) as e:
        load_plan(report(tmp_path, **over))
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_unreadable_reports(tmp_path):
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(InputError, match="not a JSON report"):
        load_plan(str(tmp_path / "bad.json"))
    with pytest.raises(InputError, match="no such file"):
        load_plan(str(tmp_path / "missing.json"))
