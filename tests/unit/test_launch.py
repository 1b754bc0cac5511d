"""`preflight launch` orchestration on this machine (LocalRemote runs the same commands that
go over SSH): streaming under host names, stop-everything on failure, timeout and Ctrl-C."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time

import pytest

from preflight.config.errors import InputError
from preflight.launch import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    LaunchOptions,
    host_command,
    load_plan,
    run,
)
from preflight.model.plan import Node, Plan
from preflight.model.policy import JobShape
from preflight.placement.launcher import collective_node, emit, env_file
from preflight.testing.local import LocalRemote


def shell_node(host: str, body: str) -> Node:
    """A node whose 'launcher' is a shell running body; the script args follow as $1.."""
    return Node(host, "127.0.0.1", "sh", 0, 1, (), ("sh", "-c", body, host), ())


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def pids_in(path: str) -> list[int]:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if os.path.exists(path) and open(path).read().strip():
            return [int(x) for x in open(path).read().split()]
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def launch(nodes, opts, **kw):
    out, err = io.StringIO(), io.StringIO()
    remotes = {n.host: LocalRemote(n.host) for n in nodes}
    code = run(nodes, remotes, opts, out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def test_output_is_streamed_under_each_host_name():
    nodes = [shell_node("a", 'echo "hello from $0 $1"; echo to-stderr >&2'),
             shell_node("bb", 'printf "no newline at the end"')]
    code, out, err = launch(nodes, LaunchOptions(("train.py",)))
    assert code == EXIT_OK, err
    lines = sorted(out.splitlines())
    assert lines == ["a  | hello from a train.py", "a  | to-stderr",
                     "bb | no newline at the end"]


def test_one_failing_host_stops_the_job_everywhere(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("fails", "sleep 0.5; echo boom; exit 3"),
             shell_node("runs", f"sleep 60 & echo $! >> {pidfile}; (setsid sleep 60 & "
                        f"echo $! >> {pidfile}); wait")]
    started = time.monotonic()
    code, out, err = launch(nodes, LaunchOptions(("train.py",)))
    assert code == EXIT_FAILED and time.monotonic() - started < 15
    assert "fails | boom" in out
    assert "preflight launch: fails failed (exit 3): stopping the job on every host" in err
    pids = pids_in(str(pidfile))
    assert len(pids) == 2
    end = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    # Both sleeps are gone, also the one in its own session (found by the job's marker).
    assert not any(alive(p) for p in pids)


def test_timeout_stops_the_job(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("slow", f"sleep 60 & echo $! > {pidfile}; wait")]
    code, _, err = launch(nodes, LaunchOptions(("x",), timeout=1.0))
    assert code == EXIT_TIMEOUT and "still running after 1 s" in err
    assert not alive(pids_in(str(pidfile))[0])


def test_ctrl_c_stops_the_job(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("a", f"sleep 60 & echo $! > {pidfile}; wait")]
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        code, _, err = launch(nodes, LaunchOptions(("x",)))
    finally:
        timer.cancel()
    assert code == EXIT_INTERRUPTED and "interrupted" in err
    assert not alive(pids_in(str(pidfile))[0])


def test_script_arguments_never_reach_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    nodes = [shell_node("a", 'printf "%s\\n" "$@"')]
    hostile = (f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "-oX'\"")
    code, out, _ = launch(nodes, LaunchOptions(hostile))
    assert code == EXIT_OK and not marker.exists()
    assert [ln.split(" | ", 1)[1] for ln in out.splitlines()] == list(hostile)


def test_chdir_that_does_not_exist_fails_the_host(tmp_path):
    code, _, err = launch([shell_node("a", "true")],
                          LaunchOptions(("x",), chdir=str(tmp_path / "nope")))
    assert code == EXIT_FAILED and "could not enter --chdir" in err


def test_host_command_carries_the_plan_env_and_marker():
    node = collective_node("n1", "10.0.0.1", "/opt/py 3/bin/python", 0, 2, 1,
                           "10.0.0.1:6767", [6070, 6071], (6070, 6071, 6767), "eth0")
    cmd = host_command(node, LaunchOptions(("train.py", "--lr", "0.1")), "tok")
    assert "PREFLIGHT_LAUNCH=tok PORT_RANGE=6070:6071 GLOO_SOCKET_IFNAME=eth0" in cmd
    assert "'\"'\"'/opt/py 3/bin/python'\"'\"' -m paddle.distributed.launch" in cmd
    assert node.command() == ("PORT_RANGE=6070:6071 GLOO_SOCKET_IFNAME=eth0 '/opt/py 3/bin/"
                             "python' -m paddle.distributed.launch --master 10.0.0.1:6767 "
                             "--nnodes 2 --rank 0 --nproc_per_node 1 --host 10.0.0.1")


def test_emitted_env_file_and_script(tmp_path):
    node = collective_node("n1", "10.0.0.1", "/opt/paddle/bin/python", 1, 2, 1,
                           "10.0.0.2:6767", [6070, 6071], (6070, 6071), None)
    plan = Plan("collective", JobShape(), (node,), master="10.0.0.2:6767", nproc_per_node=1)
    paths = emit(plan, str(tmp_path / "launch"))
    assert sorted(os.path.basename(p) for p in paths) == ["n1.env", "n1.sh"]
    assert env_file(node) == ("POD_IP=10.0.0.1\nPADDLE_MASTER=10.0.0.2:6767\nPADDLE_NNODES=2\n"
                              "PADDLE_RANK=1\nPADDLE_NPROC_PER_NODE=1\nPORT_RANGE=6070:6071\n")
    script = (tmp_path / "launch" / "n1.sh").read_text()
    assert os.access(tmp_path / "launch" / "n1.sh", os.X_OK)
    assert "exec /opt/paddle/bin/python -m paddle.distributed.launch \"$@\"" in script
    # The script exports the env file: check with a stand-in interpreter that prints it.
    fake = tmp_path / "launch" / "n1.sh"
    fake.write_text(script.replace("exec /opt/paddle/bin/python -m paddle.distributed.launch",
                                   "exec env"))
    out = os.popen(f"sh {fake} | sort").read()
    assert "PADDLE_RANK=1\n" in out and "POD_IP=10.0.0.1\n" in out


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
    assert [n.host for n in nodes] == ["n1"] and inventory == "/x/inv.yaml"
    assert nodes[0].argv[3:] == ("--servers", "a:1")


@pytest.mark.parametrize("over,fragment", [
    ({"verdict": "no-go", "reasons": ["dead: refused"]},
     "field 'verdict': the report's verdict is 'no-go': dead: refused"),
    ({"plan": None}, "field 'plan': no plan in this report"),
    ({"plan": {"nodes": []}}, "field 'plan.nodes': the plan has no hosts"),
    ({"plan": {"nodes": [{"host": "n1", "argv": ["sh", "-c", "x"], "env": {}}]}},
     "field 'plan.nodes[0].argv'"),
    ({"plan": {"nodes": [{"host": "n1", "argv": ["p", "-m", "paddle.distributed.launch"],
                          "env": {"A": 1}}]}}, "field 'plan.nodes[0].env'"),
], ids=["no-go", "no-plan", "empty", "not-the-launcher", "env-type"])
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


class _Refuses:
    name = "b"

    def start(self, command):
        raise OSError("channel refused")

    def run(self, command, timeout):
        return LocalRemote("b").run("echo stopped 0", timeout)


def test_a_host_that_cannot_start_stops_the_others(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("a", f"sleep 60 & echo $! > {pidfile}; wait"), shell_node("b", "true")]
    err = io.StringIO()
    code = run(nodes, {"a": LocalRemote("a"), "b": _Refuses()}, LaunchOptions(("x",)),
               out=io.StringIO(), err=err)
    assert code == EXIT_FAILED
    assert "b: could not start: OSError: channel refused" in err.getvalue()
    # a may have been stopped before it wrote its pid; if it did, that sleep is gone.
    pids = [int(x) for x in pidfile.read_text().split()] if pidfile.exists() else []
    assert not any(alive(p) for p in pids)
