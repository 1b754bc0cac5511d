"""`preflight launch`'s input: the host command it builds, plans read from reports, bad plans;
and what it says of a job's stop on a host."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from preflight.act.launch import (
    LaunchOptions,
    Stopped,
    host_command,
    load_plan,
    remove_command,
    stop_on,
)
from preflight.common.remote import Done
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


class Answers:
    """A host whose stop command answers as given."""

    name = "n1"

    def __init__(self, done):
        self.done = done

    def run(self, command, timeout):
        return self.done

    def start(self, command):
        raise AssertionError("a stop starts nothing")


@pytest.mark.parametrize("done,stopped,said", [
    (Done(0, "stopped 3\n", ""), Stopped(True, 3), "3 process(es) stopped"),
    (Done(0, "exiting 1\nstopped 3\n", ""), Stopped(True, 3, 1),
     "3 process(es) stopped, 1 still exiting 15 s after SIGKILL (held in the kernel, as by a "
     "CPU quota, a paused container or a hung device)"),
    (Done(255, "", "ssh: connect to host n1 port 22: No route to host"), None,
     "could not stop: ssh: connect to host n1 port 22: No route to host"),
    (Done(0, "sh: 1: grep: not found\n", ""), None, "could not stop: sh: 1: grep: not found"),
], ids=["stopped", "still-exiting", "unreachable", "garbled"])
def test_a_stop_on_a_host_says_what_it_stopped_what_outlived_the_kill_or_why_not(
        done, stopped, said):
    got = stop_on(Answers(done), "abcdef1234567890", None)
    assert got.said() == said
    if stopped is not None:
        assert got == stopped
    else:
        assert not got.ok


def test_a_stop_again_counts_both_and_says_what_is_still_there():
    assert Stopped(True, 2, 1) + Stopped(True, 1, 0) == Stopped(True, 3, 0)
    assert not (Stopped(True, 2) + Stopped(False, why="timed out")).ok
