"""Slurm as the transport, against a real Slurm: slurmctld and one slurmd per simulated node
(tests/slurmrig.py), the probe and the network tests as job steps through srun, and
drain/resume acting on the verdict."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import slurmrig as S
from conftest import PADDLE_A, PADDLE_B, SHARED_CPU
from jobscripts import TRAIN_WATCH, TRAIN_WATCH_PATH
from support import interruptible
from watchtools import first, records

from preflight.testing import testbed
from preflight.transport.slurm.health import DEFAULT_DEADLINE_S

pytestmark = pytest.mark.cluster

NODES = ["node1", "node2", "node3", "node4"]
STARVED_CORES = 0.25


@dataclass
class Rig:
    tb: testbed.Testbed
    slurm: S.Slurm

    def inventory(self, names: list[str], name: str = "nodes.yaml",
                  python: str = PADDLE_A) -> str:
        return self.tb.inventory(os.path.join(self.tb.base, name), names, python=python)

    def preflight(self, *args: str, timeout: float = 240.0) -> tuple[int, str, dict[str, Any]]:
        report = os.path.join(self.tb.base, f"r-{time.monotonic_ns()}.json")
        argv = [sys.executable, "-m", "preflight", *args]
        if args[0] == "check":
            argv += ["--json", report, "--no-log"]
        p = subprocess.run(self.slurm.cmd(argv), capture_output=True, text=True,
                           timeout=timeout, env=dict(self.slurm.env, PYTHONSAFEPATH="1"),
                           cwd=self.tb.base)
        doc: dict[str, Any] = {}
        if os.path.exists(report):
            with open(report) as fh:
                doc = json.load(fh)
        return p.returncode, p.stdout + p.stderr, doc

    def resume(self, doc: dict[str, Any], name: str) -> tuple[int, str]:
        """Writes the report doc as name and runs `preflight resume` on it, applied."""
        report = os.path.join(self.tb.base, name)
        with open(report, "w") as fh:
            json.dump(doc, fh)
        rc, out, _ = self.preflight("resume", report, "--apply")
        return rc, out

    def policy(self, text: str = "") -> str:
        path = os.path.join(self.tb.base, f"policy-{time.monotonic_ns()}.yaml")
        with open(path, "w") as fh:
            fh.write(text + SHARED_CPU)
        return path

    def jobs(self) -> str:
        """The jobs that still hold or wait for nodes. One given back is "completing" (CG)
        while slurmd runs its epilog and reports, which a loaded machine stretches: gone as
        far as its owner is concerned."""
        return self.slurm.run("squeue", "-h", "-t", "PD,CF,R,S").stdout.strip()


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    why = testbed.can_run() or S.can_run()
    if why:
        pytest.skip(f"Slurm rig unavailable: {why}")  # failed in CI (conftest)
    if not os.access(PADDLE_A, os.X_OK):
        pytest.fail(f"{PADDLE_A} missing: run scripts/setup.sh")
    tb = testbed.Testbed(len(NODES), names=NODES)
    try:
        slurm = S.Slurm(tb)
        try:
            yield Rig(tb, slurm)
        finally:
            slurm.close()
    finally:
        tb.close()


def statuses(doc: dict[str, Any]) -> dict[str, str]:
    return {h: v["status"] for h, v in doc["hosts"].items()}


def test_a_go_through_srun_with_the_network_tests(rig):
    rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                 rig.inventory(NODES[:3]), "--iperf-seconds", "1",
                                 "--iperf-warmup", "0", "--allreduce-sizes", "1")
    assert rc == 0, out
    assert statuses(doc) == {n: "ok" for n in NODES[:3]}
    # The ring's survey ran through srun, every link measured, and every bandwidth finding
    # passes: a link slowed by the machine's other work during the survey and fine on its
    # retest passes in a line of its own ("transient"), beside the survey's.
    survey = {(x["sender"], x["receiver"]): x["received_bps"] for x in doc["network"]["links"]
              if x["phase"] == "survey"}
    # A ring of three, each way: every ordered pair.
    assert set(survey) == {(a, b) for a in NODES[:3] for b in NODES[:3] if a != b} and \
        all(v for v in survey.values()), survey
    bandwidth = [f for f in doc["findings"] if f["check"] == "bandwidth"]
    assert bandwidth and all(f["status"] == "pass" for f in bandwidth), bandwidth
    allreduce = [f for f in doc["findings"] if f["check"] == "allreduce"]
    assert allreduce and all(f["status"] == "pass" for f in allreduce), allreduce
    # Each node's facts are its own (its own /tmp, its own hostname), told apart per task.
    assert {doc["hosts"][n]["facts"]["system"]["hostname"] for n in NODES[:3]} == set(NODES[:3])
    # The allocation preflight asked for is given back.
    assert rig.jobs() == ""


def test_a_ps_job_measured_through_srun(rig):
    # The plan's ports tried from node to node, the fan-in and the PS round (Paddle 2.6.2,
    # async), each as job steps of preflight's own allocation.
    rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                 rig.inventory(NODES[:3], "ps.yaml", python=PADDLE_B),
                                 "--policy", rig.policy("mode: ps\nserver_num: 1\n"
                                                        "trainer_num: 2\n"),
                                 "--iperf-seconds", "1", "--iperf-warmup", "0",
                                 "--ps-timeout", "90", timeout=400)
    assert rc == 0, out
    net = doc["network"]
    assert len(net["reach"]) == 3 and not any(r["unreached"] or r["error"]
                                              for r in net["reach"]), net["reach"]
    ps = net["ps"]
    assert ps is not None and not ps["failed"], ps
    assert len(ps["trainers"]) == 2 and all(t["steps"] > 0 for t in ps["trainers"]), ps
    assert [s["host"] for s in ps["servers"]] == [doc["plan"]["servers"][0]["host"]]
    assert rig.jobs() == ""


def test_inside_an_allocation_its_nodes_and_its_job_are_used(rig):
    # salloc runs the command with SLURM_JOB_ID and SLURM_JOB_NODELIST set: no -i needed,
    # and the steps run in that job (no second allocation, which would wait for the first).
    argv = ["salloc", "-N", "3", "-w", "node1,node2,node3", "--immediate=10",
            sys.executable, "-m", "preflight", "check", "--transport", "slurm",
            "--no-network-tests", "--no-paddle", "--no-log", "--cpu-sample", "0.1"]
    p = subprocess.run(rig.slurm.cmd(argv), capture_output=True, text=True, timeout=120,
                       env=dict(rig.slurm.env, PYTHONSAFEPATH="1"), cwd=rig.tb.base)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "reachable        node[1-3]  3 of 3 hosts reached and probed" in p.stdout, p.stdout
    assert rig.jobs() == ""


def test_a_drained_node_is_reported_not_waited_on(rig):
    rig.slurm.drain("node4", "disk replacement")
    try:
        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                     rig.inventory(NODES), "--no-network-tests", "--no-paddle")
        assert rc == 1, out
        # Said by Slurm (the stage), not found out by waiting on it (a timeout).
        assert statuses(doc)["node4"] == "failed"
        assert doc["hosts"]["node4"]["failure"] == {
            "stage": "slurm", "reason": "node drained (disk replacement)"}
        assert all(statuses(doc)[n] == "ok" for n in NODES[:3]), out
        # An operator's drain is never preflight's to touch.
        path = os.path.join(rig.tb.base, "drained.json")
        with open(path, "w") as fh:
            json.dump(doc, fh)
        rc, out, _ = rig.preflight("drain", path)
        assert rc == 0 and "node4" not in out, out
    finally:
        rig.slurm.run("scontrol", "update", "nodename=node4", "state=resume")
        rig.slurm.wait_idle(["node4"])


def test_a_node_whose_slurmd_is_stopped_is_a_finding(rig):
    rig.slurm.stop_slurmd("node3")
    try:
        deadline = 20
        start = time.monotonic()
        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                     rig.inventory(NODES[:3]), "--no-network-tests",
                                     "--no-paddle", "--deadline", str(deadline))
        # Bounded by its deadline (and srun's own ending of the step), not by the minutes
        # Slurm takes to call a silent node down.
        assert time.monotonic() - start < 6 * deadline, out
        assert rc == 1, out
        assert statuses(doc)["node3"] == "failed", out
        assert statuses(doc)["node1"] == statuses(doc)["node2"] == "ok", out
        failure = doc["hosts"]["node3"]["failure"]
        # Slurm's own words: the step could not start there, or the node is not responding.
        assert failure["stage"] in ("slurm", "probe") and failure["reason"], failure
        assert "did not run on it" in failure["reason"] or "not responding" in \
            failure["reason"], failure
    finally:
        rig.slurm.start_slurmd("node3")
        rig.slurm.run("scontrol", "update", "nodename=node3", "state=resume")
        rig.slurm.wait_idle(["node3"], timeout=60)


def test_a_starved_slurmd_is_no_clock_ahead(rig):
    # node3's slurmd (and the step it starts) under a fifth of a core: its probe starts
    # late and ends last, while every node shares this machine's clock. A late answer is
    # not a clock ahead: the clock is judged within the step's own delays, or said to be
    # past judging, never blamed.
    inv = rig.inventory(NODES[:4], "four.yaml")
    rig.tb.limit_cpu("node3", 0.2)
    try:
        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i", inv,
                                     "--no-network-tests", "--no-paddle", "--policy",
                                     rig.policy())
    finally:
        rig.tb.unlimit_cpu("node3")
    assert rc == 1, out
    assert [f["hosts"] for f in doc["findings"] if f["status"] == "fail"
            and f["check"] == "cpu-cores"] == [["node3"]], out
    clocks = [f for f in doc["findings"] if f["check"] == "clock"]
    assert not [f for f in clocks if f["status"] in ("warn", "fail")], clocks
    for f in clocks:
        if f["status"] == "could-not-check":
            assert f["hosts"] == ["node3"] and "could not judge its clock" in f["message"]
    for node in NODES[:4]:
        skew = doc["hosts"][node]["facts"]["clock"]
        assert abs(skew["skew_s"]) <= skew["uncertainty_s"] + 0.5, (node, skew)


def test_a_starved_node_is_drained_then_resumed_when_it_passes_again(rig):
    inv = rig.inventory(NODES[:3], "three.yaml")
    rig.tb.limit_cpu("node2", STARVED_CORES)  # the quota holds slurmd and its jobs
    try:
        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i", inv,
                                     "--no-network-tests", "--no-paddle", "--policy",
                                     rig.policy())
        assert rc == 1, out
        failed = [f for f in doc["findings"] if f["status"] == "fail"]
        assert [f["hosts"] for f in failed if f["check"] == "cpu-cores"] == [["node2"]], out
        report = os.path.join(rig.tb.base, "starved.json")
        with open(report, "w") as fh:
            json.dump(doc, fh)
        # Printed first (nothing changes), then applied; applying twice changes nothing.
        rc, out, _ = rig.preflight("drain", report)
        assert rc == 0 and out.startswith("scontrol update nodename=node2 state=drain "
                                          "'reason=preflight: cpu-cores: "), out
        assert rig.slurm.states()["node2"] == "idle"
        rc, out, _ = rig.preflight("drain", report, "--apply")
        assert rc == 0 and out.startswith("drained node2: preflight: cpu-cores: "), out
        assert rig.slurm.states()["node2"].startswith("drain")
        assert rig.slurm.reason("node2").startswith("preflight:")
        rc, out, _ = rig.preflight("drain", report, "--apply")
        assert "# node2: already drained for this reason" in out, out
        # Slurm runs no step on a drained node: the check through Slurm re-checks the node
        # preflight drained over SSH, and finds it still starved; it stays drained.
        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i", inv,
                                     "--no-network-tests", "--no-paddle", "--policy",
                                     rig.policy())
        assert rc == 1, out
        assert list(doc["rechecked_over_ssh"]) == ["node2"], out
        assert "RE-CHECKED OVER SSH (drained by preflight" in out and "node2" in out, out
        assert statuses(doc)["node2"] == "ok", out  # its facts, over SSH
        # The report says which transport reached each node; SSH details only where SSH did.
        assert {n: (h["via"], h["ssh"] is None) for n, h in doc["hosts"].items()} == {
            "node1": ("slurm", True), "node2": ("ssh", False), "node3": ("slurm", True)}, out
        assert any(f["check"] == "cpu-cores" and f["hosts"] == ["node2"]
                   for f in doc["findings"] if f["status"] == "fail"), out
        assert rig.slurm.states()["node2"].startswith("drain")
    finally:
        rig.tb.unlimit_cpu("node2")
    # The fault lifted: the same check through Slurm re-checks node2 over SSH and passes it,
    # and resume returns it to Slurm; the other nodes were checked through srun meanwhile.
    rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i", inv,
                                 "--no-network-tests", "--no-paddle", "--policy", rig.policy())
    assert rc == 0, out
    assert list(doc["rechecked_over_ssh"]) == ["node2"] and statuses(doc) == {
        n: "ok" for n in NODES[:3]}, out
    assert rig.jobs() == ""  # the allocation for node1 and node3 was given back
    rc, out = rig.resume(doc, "lifted.json")
    assert rc == 0 and out.startswith("resumed node2: passes again (was: preflight: "), out
    rig.slurm.wait_idle(["node2"])
    rc, out = rig.resume(doc, "lifted.json")
    assert rc == 0 and "nothing to resume" in out, out


def test_a_node_drained_for_a_slow_link_returns_only_once_the_link_is_measured(rig):
    # preflight drained node2 for its link. A check without the network tests cannot tell
    # whether the link was fixed: resume leaves node2 drained, saying why. A check with them
    # measures node2 over SSH beside node1 and node3 through srun, and returns it.
    inv = rig.inventory(NODES[:3], "link.yaml")
    rig.slurm.drain("node2", "preflight: bandwidth: slow host: sends at most 95 Mbit/s")
    try:
        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i", inv,
                                     "--no-network-tests", "--no-paddle")
        assert rc == 0 and list(doc["rechecked_over_ssh"]) == ["node2"], out
        rc, out = rig.resume(doc, "facts-only.json")
        assert rc == 0 and out.startswith("# node2: drained for bandwidth, which this report "
                                          "did not pass on it: left drained"), out
        assert rig.slurm.states()["node2"].startswith("drain")

        rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i", inv,
                                     "--iperf-seconds", "1", "--iperf-warmup", "0",
                                     "--allreduce-sizes", "1")
        assert rc == 0, out
        links = doc["network"]["links"]
        assert any("node2" in (x["sender"], x["receiver"]) for x in links), links
        assert doc["network"]["allreduce"]["hosts"] == NODES[:3], doc["network"]["allreduce"]
        assert rig.jobs() == ""
        rc, out = rig.resume(doc, "measured.json")
        assert rc == 0 and out.startswith("resumed node2: passes again"), out
        rig.slurm.wait_idle(["node2"])
    finally:
        if rig.slurm.states().get("node2", "").startswith("drain"):
            rig.slurm.run("scontrol", "update", "nodename=node2", "state=resume")
            rig.slurm.wait_idle(["node2"])


def test_health_check_mode_drains_its_node_and_resumes_it_when_healthy(rig):
    # As slurmd runs a HealthCheckProgram: on the node (its network and hostname), with the
    # node's name in SLURMD_NODENAME. The fault: an open-files limit of 1024 for what slurmd
    # starts (the classic "Too many open files" under load).
    sshd = rig.tb.hosts["node3"].sshd
    assert sshd is not None

    def health(nofile: int) -> subprocess.CompletedProcess[str]:
        argv = ["nsenter", "-t", str(sshd.pid), "-n", "-u", "--", "prlimit",
                f"--nofile={nofile}:{nofile}", "--", sys.executable, "-m", "preflight",
                "health", "--drain"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env=dict(rig.slurm.env, PYTHONSAFEPATH="1",
                                       SLURMD_NODENAME="node3"))

    try:
        start = time.monotonic()
        sick = health(1024)
        took = time.monotonic() - start
        assert sick.returncode == 1, sick.stdout + sick.stderr
        first = sick.stdout.splitlines()[0]
        assert first.startswith("ERROR: preflight health: nofile: open-files limit 1024"), first
        assert took < 1.5 * DEFAULT_DEADLINE_S, took  # its own deadline bounds it
        assert sick.stdout.splitlines()[1].startswith("drained node3: preflight: nofile: ")
        assert rig.slurm.states()["node3"].startswith("drain")
        again = health(1024)  # idempotent: drained once, for this reason
        assert again.returncode == 1 and len(again.stdout.splitlines()) == 1, again.stdout
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        well = health(65536 if hard == resource.RLIM_INFINITY else hard)
        assert well.returncode == 0, well.stdout + well.stderr
        assert well.stdout.splitlines()[0].startswith("OK: preflight health: ")
        assert well.stdout.splitlines()[1].startswith("resumed node3: passes again")
        rig.slurm.wait_idle(["node3"])
        # Drained for its link, which one node cannot measure alone: health leaves it.
        rig.slurm.drain("node3", "preflight: bandwidth: slow host: sends at most 95 Mbit/s")
        link = health(65536 if hard == resource.RLIM_INFINITY else hard)
        assert link.returncode == 0, link.stdout + link.stderr
        assert link.stdout.splitlines()[1].startswith(
            "node3: drained for bandwidth, which this report did not pass on it: left "
            "drained"), link.stdout
        assert rig.slurm.states()["node3"].startswith("drain")
    finally:
        if rig.slurm.states().get("node3", "").startswith("drain"):
            rig.slurm.run("scontrol", "update", "nodename=node3", "state=resume")
            rig.slurm.wait_idle(["node3"])


# A real gloo all-reduce over the plan's ranks; each rank leaves a marker in its node's /root.
TRAIN = """\
import paddle
import paddle.distributed as dist
dist.init_parallel_env()
t = paddle.to_tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
n = dist.get_world_size()
assert float(t.numpy()[0]) == n * (n + 1) / 2, t
open("/root/rank-%d-of-%d" % (dist.get_rank(), n), "w").write("ok\\n")
"""


def markers(rig: Rig, names: list[str]) -> dict[str, list[str]]:
    return {n: sorted(f for f in os.listdir(rig.tb.hosts[n].dir + "/root")
                      if f.startswith("rank-")) for n in names}


def clear(rig: Rig, names: list[str]) -> None:
    for n in names:
        for f in markers(rig, [n])[n]:
            os.unlink(os.path.join(rig.tb.hosts[n].dir, "root", f))
        rig.tb.write_file(n, "/root/train.py", TRAIN)


def test_the_plan_runs_as_a_batch_job_emitted_and_through_launch(rig):
    """The plan's emitted sbatch script runs the job on its three nodes, and so does
    `preflight launch --transport slurm` from the report.

    Its time: two real Slurm jobs run to their end (sbatch --wait), each a job of three
    nodes' launchers and ranks; 24 s to 89 s in whole runs, as slurmd's scheduling and epilog
    on a loaded machine make it."""
    nodes = NODES[:3]
    out_dir = os.path.join(rig.tb.base, "batch")
    rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                 rig.inventory(nodes, "batch.yaml"), "--no-network-tests",
                                 "--emit-launch", out_dir)
    assert rc == 0, out
    script = os.path.join(out_dir, "preflight.sbatch")
    with open(script) as fh:
        text = fh.read()
    assert "#SBATCH --nodelist=node1,node2,node3" in text and "#SBATCH --nodes=3" in text
    # sbatch as an operator would: each node's launcher from its own /root.
    clear(rig, nodes)
    p = rig.slurm.run("sbatch", "--wait", "--chdir=/root",
                      f"--output={rig.tb.base}/batch-%j.out", script, "train.py", timeout=200)
    assert p.returncode == 0, p.stdout + p.stderr
    assert markers(rig, nodes) == {"node1": ["rank-0-of-3"], "node2": ["rank-1-of-3"],
                                   "node3": ["rank-2-of-3"]}
    # preflight launch submits the same from the report, and waits for the job.
    report = os.path.join(rig.tb.base, "batch.json")
    with open(report, "w") as fh:
        json.dump(doc, fh)
    clear(rig, nodes)
    rc, out, _ = rig.preflight("launch", "--transport", "slurm", "--plan", report,
                               "--chdir", "/root", "--timeout", "150", "--", "train.py",
                               timeout=300)
    assert rc == 0, out
    assert "ended with exit 0" in out, out
    assert [len(v) for v in markers(rig, nodes).values()] == [1, 1, 1], out
    assert rig.jobs() == ""


def test_drain_without_operator_rights_is_refused_in_one_line(rig):
    doc = {"report_version": 1, "verdict": "no-go", "hosts": {"node1": {"status": "ok"}},
           "findings": [{"check": "shm", "status": "fail", "hosts": ["node1"],
                         "message": "node1: /dev/shm 64 MiB"}]}
    report = os.path.join(rig.tb.base, "user.json")
    with open(report, "w") as fh:
        json.dump(doc, fh)
    os.chmod(report, 0o644)
    user = rig.tb.add_user()
    python, code = rig.tb.code_for(user)
    argv = [python, "-m", "preflight", "drain", report, "--apply"]
    p = subprocess.run(rig.tb.client_cmd(argv, user=user), capture_output=True, text=True,
                       timeout=60, env=dict(rig.slurm.env, PYTHONSAFEPATH="1",
                                            PYTHONPATH=code), cwd=rig.tb.base)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("preflight: error: drain: scontrol "
                                                   "refused node1: "), p.stderr
    assert rig.slurm.states()["node1"] == "idle"  # nothing changed


def _launch_train_watch(rig: Rig, report: str, timeout_s: int) -> subprocess.Popen[str]:
    """`preflight launch --transport slurm` of the report's plan running TRAIN_WATCH from
    /root, in the background, interruptible as from a terminal."""
    return subprocess.Popen(rig.slurm.cmd([
        sys.executable, "-m", "preflight", "launch", "--transport", "slurm", "--plan", report,
        "--chdir", "/root", "--timeout", str(timeout_s), "--",
        os.path.basename(TRAIN_WATCH_PATH), str(10 ** 6)]), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=dict(rig.slurm.env, PYTHONSAFEPATH="1"),
        cwd=rig.tb.base, preexec_fn=interruptible)


def test_a_job_in_slurm_is_watched_through_its_own_allocation(rig):
    # The job that `preflight launch --transport slurm` submitted; the watch's samplers run as
    # steps of that very job (srun --overlap --jobid): no SSH, nothing queued.
    nodes = NODES[:3]
    rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                 rig.inventory(nodes, "watch.yaml"), "--no-network-tests")
    assert rc == 0, out
    report = os.path.join(rig.tb.base, "watch.json")
    with open(report, "w") as fh:
        json.dump(doc, fh)
    for n in nodes:
        rig.tb.write_file(n, TRAIN_WATCH_PATH, TRAIN_WATCH)
    env = dict(rig.slurm.env, PYTHONSAFEPATH="1")
    launch = _launch_train_watch(rig, report, 240)
    try:
        job = ""
        end = time.monotonic() + 60
        while not job and time.monotonic() < end:
            time.sleep(1)
            job = rig.slurm.run("squeue", "-h", "-t", "R", "-o", "%i").stdout.strip()
        assert job, "the job did not start"
        p = subprocess.run(rig.slurm.cmd([
            sys.executable, "-m", "preflight", "watch", "--plan", report, "--transport",
            "slurm", "--jobid", job, "--interval", "2", "--persist", "6", "--once"]),
            capture_output=True, text=True, timeout=120, env=env, cwd=rig.tb.base)
        samplers = {}
        end = time.monotonic() + 20  # the samplers end with their steps' channels
        while time.monotonic() < end:
            samplers = {n: c for n in nodes for c in rig.tb.commands(n)
                        if "preflight-sampler" in c}
            if not samplers:
                break
            time.sleep(1)
        # Watched again, and the job cancelled under the watch (scancel, as its user or an
        # administrator would): its samplers end with it.
        log = os.path.join(rig.tb.base, "watch-scancel.jsonl")
        w = subprocess.Popen(rig.slurm.cmd([
            sys.executable, "-m", "preflight", "watch", "--plan", report, "--transport",
            "slurm", "--jobid", job, "--interval", "2", "--persist", "6", "--for", "300",
            "--log", log]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=rig.tb.base)
        try:
            watched = first(log, "finding", "progress", time.monotonic() + 60)
            rig.slurm.run("scancel", job)
            wout, werr = w.communicate(timeout=120)  # it ends with the job, long before --for
        finally:
            if w.poll() is None:
                w.kill()
                w.communicate()
    finally:
        rig.slurm.run("scancel", job or "0")
        launch.wait(60)
    # The job's ranks were found on every node, stepping, and nothing held them.
    assert p.returncode == 0, p.stdout + p.stderr
    assert " progress " in p.stdout and "3 ranks of master " in p.stdout, p.stdout
    assert "node[1-3]" in p.stdout, p.stdout
    assert samplers == {}, samplers
    # Cancelled: the job was stopped as a whole, said once; no rank or host blamed, and the
    # samplers' end with it is no host that could not be checked.
    assert watched is not None, wout + werr
    rs = records(log)
    [last] = [r for r in rs if r["type"] == "last"]
    assert (last["check"], last["status"], last["cause"]) == ("ended", "warn", "job-stopped"), \
        last
    assert f"the Slurm job {job} on node[1-3] was cancelled" in last["message"], last
    assert w.returncode == 1, wout + werr
    blamed = [r["message"] for r in rs if r["type"] == "finding"
              and r["status"] in ("fail", "could-not-check")]
    assert blamed == [], blamed
    end = time.monotonic() + 60
    while rig.jobs() and time.monotonic() < end:
        time.sleep(1)
    assert rig.jobs() == ""


def _steps(rig: Rig, node: str) -> int:
    try:
        with open(os.path.join(rig.tb.hosts[node].dir, "root", "log", "workerlog.0")) as fh:
            return sum(1 for line in fh if line.startswith("step "))
    except OSError:
        return 0


def test_act_on_a_job_launched_through_slurm_drains_its_node_and_submits_the_new_plan(rig):
    """The watch acts on a job launched through Slurm: drain, stop, check, submit again.

    Its time: a batch job's start through slurmd, the quota's naming, --act-after, the stop
    and the new Slurm job's start, each a real step."""
    # The job `preflight launch --transport slurm` submitted on 3 of the 4 nodes (--nnodes 3:
    # the fourth is a spare); a CPU quota on one mid-run. The watch drains it in Slurm, stops
    # the job by its marker (sbatch exported it), checks again without it, submits the new
    # plan and follows the new Slurm job.
    rc, out, doc = rig.preflight("check", "--transport", "slurm", "-i",
                                 rig.inventory(NODES, "act.yaml"), "--no-network-tests",
                                 "--nnodes", "3", "--policy", rig.policy())
    assert rc == 0, out
    report = os.path.join(rig.tb.base, "act.json")
    with open(report, "w") as fh:
        json.dump(doc, fh)
    planned = [n["host"] for n in doc["plan"]["nodes"]]
    spare = next(n for n in NODES if n not in planned)
    slow = planned[1]
    for n in NODES:
        rig.tb.write_file(n, TRAIN_WATCH_PATH, TRAIN_WATCH)
        log = os.path.join(rig.tb.hosts[n].dir, "root", "log", "workerlog.0")
        if os.path.exists(log):
            os.unlink(log)
    env = dict(rig.slurm.env, PYTHONSAFEPATH="1")
    launch = _launch_train_watch(rig, report, 400)
    wlog = os.path.join(rig.tb.base, "watch-act.jsonl")
    watch = None
    drained = ""
    out = err = ""
    try:
        end = time.monotonic() + 150
        while time.monotonic() < end and not all(_steps(rig, n) >= 3 for n in planned):
            assert launch.poll() is None, launch.communicate()
            time.sleep(1)
        assert all(_steps(rig, n) >= 3 for n in planned), "the job did not start stepping"
        watch = subprocess.Popen(rig.slurm.cmd([
            sys.executable, "-m", "preflight", "watch", "--plan", report, "--transport",
            "slurm", "--log", wlog, "--interval", "2", "--persist", "10", "--for", "240",
            "--act", "--act-after", "10s"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=rig.tb.base, preexec_fn=interruptible)
        time.sleep(8)
        rig.tb.limit_cpu(slow, 0.1)
        planted = time.monotonic()
        end = planted + 240
        while time.monotonic() < end and _steps(rig, spare) < 3:
            assert watch.poll() is None, watch.communicate()
            time.sleep(1)
        assert _steps(rig, spare) >= 3, [r for r in records(wlog) if r["type"] == "act"]
        print(f"\nthe Slurm job ran again on the spare {time.monotonic() - planted:.1f} s after "
              "the quota")
        drained = rig.slurm.states()[slow]
        time.sleep(10)  # the watch follows the new job
    finally:
        rig.tb.unlimit_cpu(slow)
        if watch is not None:
            watch.send_signal(signal.SIGINT)
            out, err = watch.communicate(timeout=60)
        rig.slurm.run("scancel", "--user", "root")
        launch.wait(60)
        rig.slurm.run("scontrol", "update", f"nodename={slow}", "state=resume")
        end = time.monotonic() + 60
        while rig.jobs() and time.monotonic() < end:
            time.sleep(1)
    assert drained.startswith("drain"), drained
    rs = records(wlog)
    everything = [r for r in rs if r["type"] == "act"]
    # Named, it is acted on only once named without a break for --act-after (10 s here: the
    # default 2 minutes is judged in the unit tests and the corpus).
    assert everything[0]["step"] == "wait" and slow in everything[0]["text"], everything[0]
    acts = [r for r in everything if r["step"] != "wait"]
    steps = [r["step"] for r in acts]
    # (a second launch line where Slurm took more than 10 s to run the new job)
    assert steps[:7] == ["drain", "stop", "stop", "stop", "check", "check", "launch"], out + err
    assert steps[7:] in ([], ["launch"]), out + err
    assert acts[0]["text"].startswith(f"scontrol update nodename={slow} state=drain "
                                      "'reason=preflight: cpu-cores: watch: "), acts[0]
    assert sorted(r["host"] for r in acts if r["step"] == "stop") == sorted(planned)
    assert sorted(acts[5]["hosts"]) == sorted(set(planned) - {slow} | {spare})
    # It followed the new Slurm job: a second start on the new plan's nodes, its marker.
    starts = [r for r in rs if r["type"] == "start"]
    assert len(starts) == 2 and sorted(starts[1]["hosts"]) == sorted(acts[5]["hosts"]), out + err
    assert starts[1]["marker"] == acts[-1]["marker"] != starts[0]["marker"] != ""
    assert acts[-1]["jobid"] and acts[-1]["text"].startswith("launched again on "), acts[-1]
    assert launch.returncode != 0  # the first launch saw its job stopped
