"""A first contact with a cluster shaped like a real one: preflight runs as an unprivileged
user (sshd refuses root), from that user's own ~/.ssh/config (aliases only in the inventory,
DNS-like names, a host on port 2222), a hashed known_hosts written by ssh-keyscan -H, a
site CA whose @cert-authority line vouches for a host known by no plain key, a bastion, and
the inventories people already have (Ansible INI, a hostfile) beside preflight's YAML."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import SHARED_CPU
from jobscripts import PS_FLEET

from preflight.testing import testbed
from preflight.transport.ssh import knownhosts

pytestmark = pytest.mark.cluster

PADDLE_A = testbed.paddle_python("3.3.1")
PADDLE_B = testbed.paddle_python("2.6.2")
# An interpreter with preflight's dependencies that users other than root can run
# (scripts/setup.sh): .venv's may be readable by root only, and so may this checkout.
CONTROLLER = os.path.join(testbed.TESTENV, "controller", "bin", "python")

# node1..3 are aliases; the hosts' names are h1..h3 (resolved by the cluster's "DNS").
SSH_CONFIG = """\
Host node1
    HostName h1
Host node2
    HostName h2
Host node3
    HostName h3
    Port 2222
Host *
    HashKnownHosts yes
"""
# The same cluster seen from outside: only the login node (node1) answers; the others are
# reached through it.
BASTION_CONFIG = "Host node2 node3\n    ProxyJump node1\n" + SSH_CONFIG

ANSIBLE_INI = f"""\
# a site's Ansible inventory, as its playbooks use it
[login]
node1

[compute]
node[2:3]

[cluster:children]
login
compute

[cluster:vars]
preflight_python={PADDLE_A}
ansible_python_interpreter=/usr/bin/python3
"""

TRAIN_GLOO = """\
import getpass, socket
import paddle
import paddle.distributed as dist
dist.init_parallel_env()
t = paddle.to_tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
n = dist.get_world_size()
assert float(t.numpy()[0]) == n * (n + 1) / 2
print("rank", dist.get_rank(), "of", n, "as", getpass.getuser(), "on", socket.gethostname(),
      flush=True)
"""

TRAIN_PS = """\
import getpass, os, socket
role = os.environ.get("TRAINING_ROLE", "?")
""" + PS_FLEET + """\
print(role, "done as", getpass.getuser(), "on", socket.gethostname(), flush=True)
"""


@dataclass
class Run:
    rc: int
    out: str
    report: dict[str, Any]


class RealCluster:
    def __init__(self, tb: testbed.Testbed, user: str, ca: str) -> None:
        self.tb, self.user, self.ca = tb, user, ca
        self.home = tb.home(user)
        self.python, self.code = tb.code_for(user)

    def path(self, name: str) -> str:
        return os.path.join(self.home, name)

    def write(self, name: str, text: str) -> str:
        return self.tb.write_as(self.user, self.path(name), text)

    def run(self, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        """Runs a command as the user in the client namespace, names resolving; preflight
        is the copy of the code under test in self.code."""
        env = ["env", f"HOME={self.home}", f"USER={self.user}", "PYTHONSAFEPATH=1",
               f"PYTHONPATH={self.code}", f"XDG_STATE_HOME={self.home}/.local/state",
               "PATH=/usr/bin:/bin"]
        cmd = self.tb.client_cmd([*env, *argv], user=self.user, names=True)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=self.home, stdin=subprocess.DEVNULL)

    def preflight(self, *args: str, timeout: float = 240) -> Run:
        report = self.path(f"report-{time.monotonic_ns()}.json")
        json_args = ["--json", report] if args[0] == "check" else []
        p = self.run(self.python, "-m", "preflight", *args, *json_args, timeout=timeout)
        doc = {}
        if os.path.exists(report):
            with open(report) as fh:
                doc = json.load(fh)
        return Run(p.returncode, p.stdout + p.stderr, doc)

    def scan_known_hosts(self) -> None:
        """known_hosts as a user's first `ssh` to each name leaves it (HashKnownHosts yes):
        hashed lines under the names, h3 off port 22 left out: the site CA vouches for it."""
        scan = self.run("ssh-keyscan", "-H", "-t", "ed25519", "h1", "h2", timeout=30)
        assert scan.returncode == 0 and scan.stdout.count("|1|") == 2, scan.stderr
        with open(self.ca + ".pub") as fh:
            kind, b64 = fh.read().split()[:2]
        self.write(".ssh/known_hosts", scan.stdout + f"@cert-authority * {kind} {b64}\n")


@pytest.fixture(scope="module")
def real() -> Iterator[RealCluster]:
    why = testbed.can_run()
    if why:
        pytest.fail(f"the simulated cluster cannot run here: {why}")
    for py in (CONTROLLER, PADDLE_A, PADDLE_B):
        assert os.access(py, os.X_OK), f"{py} missing: run scripts/setup.sh"
    tb = testbed.Testbed(3, root_login=False)
    try:
        user = tb.add_user()
        ca = tb.new_ca()
        tb.listen_also("h3", 2222)
        tb.certify("h3", ca, ["h3"])
        rc = RealCluster(tb, user, ca)
        rc.write(".ssh/config", SSH_CONFIG)
        rc.write(".ssh/config-bastion", BASTION_CONFIG)
        rc.scan_known_hosts()
        rc.write("cluster.ini", ANSIBLE_INI)
        rc.write("hostfile", "node1 slots=1\nnode2 slots=1\nnode3 slots=1\n")
        rc.write("cluster.yaml", "hosts:\n  node1: {}\n  node2: {}\n  node3: {}\n")
        rc.write("train_gloo.py", TRAIN_GLOO)
        rc.write("train_ps.py", TRAIN_PS)
        yield rc
    finally:
        tb.close()


def launch_lines(out: str, marker: str) -> list[str]:
    return sorted(line for line in out.splitlines() if marker in line)


def test_root_is_refused_so_nothing_below_can_pass_as_root(real):
    p = real.run("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-l", "root",
                 "node1", "true", timeout=30)
    assert p.returncode == 255 and "Permission denied" in p.stderr, p.stderr


def test_an_unprivileged_user_checks_and_launches_from_their_ssh_config(real):
    emit = real.path("launch-scripts")
    run = real.preflight("check", "-i", real.path("cluster.ini"), "--iperf-seconds", "1",
                         "--iperf-warmup", "0", "--allreduce-sizes", "1", "--emit-launch", emit)
    assert run.rc == 0, run.out
    doc = run.report
    assert doc["verdict"] == "go" and doc["inventory_format"] == "auto"
    # Aliases in, names out: what ssh connected to is the config's HostName.
    assert {h: v["address"] for h, v in doc["hosts"].items()} == \
        {"node1": "h1", "node2": "h2", "node3": "h3"}
    # node3 (port 2222, no plain key anywhere) was reached on its CA-signed certificate.
    # No key of its own was recorded under any of its names (hashed entries included; a
    # substring test would also match the base64 of another host's hash).
    known = knownhosts.load([real.path(".ssh/known_hosts")])
    assert known.for_names(["h3", "[h3]:2222", "node3"]) == []
    assert known.for_names(["h1"])  # the lookup reads the hashed entries
    assert {f["check"] for f in doc["findings"]} >= {"bandwidth", "allreduce"}
    ips = [n["address"] for n in doc["plan"]["nodes"]]
    assert ips == [real.tb.hosts[h].address for h in ("h1", "h2", "h3")]
    assert sorted(os.listdir(emit)) == sorted(f"node{i}.{x}" for i in (1, 2, 3)
                                              for x in ("env", "sh"))
    report = real.write("collective.json", json.dumps(doc))
    launched = real.preflight("launch", "--plan", report, "--chdir", "/tmp", "--timeout",
                              "150", "--", os.path.join(real.home, "train_gloo.py"))
    assert launched.rc == 0, launched.out
    assert launch_lines(launched.out, " as ") == [
        f"node{i} | rank {i - 1} of 3 as {real.user} on h{i}" for i in (1, 2, 3)]


def test_a_ps_job_launches_as_the_user(real):
    # The rig's hosts share this machine's CPUs: no free core of their own for a server.
    policy = real.write("ps.yaml", "mode: ps\nserver_num: 1\ntrainer_num: 2\n" + SHARED_CPU)
    inv = real.write("ps.yaml-inv", "defaults: {python: " + PADDLE_B + "}\n"
                     "hosts: {node1: {}, node2: {}, node3: {}}\n")
    run = real.preflight("check", "-i", inv, "--policy", policy, "--no-network-tests")
    assert run.rc == 0, run.out
    plan = run.report["plan"]
    assert plan["mode"] == "ps" and len(plan["servers"]) == 1 and len(plan["workers"]) == 2
    report = real.write("ps.json", json.dumps(run.report))
    launched = real.preflight("launch", "--plan", report, "--chdir", "/tmp", "--timeout",
                              "150", "--", os.path.join(real.home, "train_ps.py"))
    assert launched.rc == 0, launched.out
    done = launch_lines(launched.out, " done as ")
    assert sorted(line.split(" | ")[1].split()[0] for line in done) == \
        ["PSERVER", "TRAINER", "TRAINER"], launched.out
    assert all(f"done as {real.user} on " in line for line in done), done


def test_through_a_bastion_check_and_launch(real):
    cfg = real.path(".ssh/config-bastion")
    real.tb.isolate_client("h1")
    try:
        # Without the ProxyJump, only the login node is reachable: the others are findings.
        direct = real.preflight("check", "-i", real.path("hostfile"), "--no-network-tests",
                                "--no-paddle", "--connect-timeout", "3")
        failed = {f["hosts"][0]: f["message"] for f in direct.report["findings"]
                  if f["check"] == "reachable" and f["status"] == "could-not-check"}
        assert set(failed) == {"node2", "node3"}, direct.out
        assert all("unreachable" in m or "no route" in m for m in failed.values()), failed
        # The bastion's own key is checked like any host's: unknown, nothing goes through.
        unknown = real.write(".ssh/config-bastion-unknown", BASTION_CONFIG.replace(
            "Host node1\n    HostName h1\n",
            "Host node1\n    HostName h1\n    HostKeyAlias bastion-never-seen\n"))
        refused = real.preflight("check", "-i", real.path("hostfile"), "-F", unknown,
                                 "--no-network-tests", "--no-paddle")
        behind = {f["hosts"][0]: f["message"] for f in refused.report["findings"]
                  if f["check"] == "reachable" and f["status"] == "could-not-check"}
        assert set(behind) == {"node1", "node2", "node3"}, refused.out
        assert behind["node2"].startswith("node2: could not check (host-key): through jump "
                                          "host node1: host key unknown"), behind["node2"]
        run = real.preflight("check", "-i", real.path("cluster.ini"), "-F", cfg,
                             "--iperf-seconds", "1", "--iperf-warmup", "0",
                             "--allreduce-sizes", "1")
        assert run.rc == 0, run.out
        assert run.report["ssh_config"] == cfg
        assert {f["check"] for f in run.report["findings"]} >= {"bandwidth", "allreduce"}
        report = real.write("bastion.json", json.dumps(run.report))
        # The report remembers its -F: launch goes through the bastion without being told.
        launched = real.preflight("launch", "--plan", report, "--chdir", "/tmp", "--timeout",
                                  "150", "--", os.path.join(real.home, "train_gloo.py"))
        assert launched.rc == 0, launched.out
        assert len(launch_lines(launched.out, f" as {real.user} on ")) == 3
    finally:
        real.tb.reconnect_client()


def _shape(doc: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the inventory's format (timings and samples may)."""
    return {"verdict": doc["verdict"],
            "hosts": {h: (v["address"], v["status"]) for h, v in doc["hosts"].items()},
            "findings": sorted((f["check"], f["status"], tuple(f["hosts"]))
                               for f in doc["findings"]),
            "plan": [(n["host"], n["address"], n["rank"]) for n in doc["plan"]["nodes"]]}


def test_ansible_ini_hostfile_and_yaml_give_the_same_report(real):
    shapes = {}
    for inv in ("cluster.ini", "hostfile", "cluster.yaml"):
        run = real.preflight("check", "-i", real.path(inv), "--no-network-tests",
                             "--no-paddle", "--skip", "paddle-stack", "--skip", "stack-compat")
        assert run.report, run.out
        assert run.report["waived"] == ["paddle-stack", "stack-compat"]
        shapes[inv] = _shape(run.report)
    assert shapes["cluster.ini"]["verdict"] == "go", shapes
    assert shapes["cluster.ini"] == shapes["hostfile"] == shapes["cluster.yaml"]
    limited = real.preflight("check", "-i", real.path("cluster.ini"), "--limit", "compute",
                             "--no-network-tests", "--no-paddle")
    assert sorted(limited.report["hosts"]) == ["node2", "node3"]


def test_accepted_keys_are_what_openssh_reads_and_a_changed_one_is_refused(real):
    # A user who never connected: --accept-new-host-keys records each key as OpenSSH would.
    cfg = real.write(".ssh/config-new", SSH_CONFIG.replace(
        "Host *\n", "Host *\n    UserKnownHostsFile ~/.ssh/known_hosts_new\n"))
    new = real.preflight("check", "-i", real.path("hostfile"), "-F", cfg, "--no-paddle",
                         "--no-network-tests", "--accept-new-host-keys")
    assert [o["status"] for o in new.report["hosts"].values()] == ["ok", "ok", "ok"], new.out
    with open(real.path(".ssh/known_hosts_new")) as fh:
        lines = fh.read().splitlines()
    assert len(lines) == 3 and all(line.startswith("|1|") for line in lines)  # hashed
    for alias in ("node1", "node3"):  # OpenSSH itself accepts what preflight wrote
        p = real.run("ssh", "-F", cfg, "-o", "StrictHostKeyChecking=yes", "-o",
                     "BatchMode=yes", alias, "true", timeout=30)
        assert p.returncode == 0, p.stderr
    # A key that changes under a hashed name is refused, with or without the opt-in.
    real.tb.change_host_key("h2")
    try:
        for extra in ((), ("--accept-new-host-keys",)):
            run = real.preflight("check", "-i", real.path("hostfile"), "--no-paddle",
                                 "--no-network-tests", *extra)
            [msg] = [f["message"] for f in run.report["findings"]
                     if f["check"] == "reachable" and f["status"] == "could-not-check"]
            assert msg.startswith("node2: could not check (host-key): host key CHANGED for "
                                  "h2:22"), msg
    finally:
        real.scan_known_hosts()
