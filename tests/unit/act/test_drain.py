"""drain and resume decided on a report and Slurm's view of its nodes (no Slurm needed)."""

from __future__ import annotations

import os
from typing import Any

from preflight.report.jsonreport import typed
from preflight.transport.slurm.drain import (
    PREFIX,
    REASON_MAX,
    checks_of,
    drain_actions,
    drain_now,
    drained_for,
    failed_nodes,
    passed_nodes,
    reason,
    resume_actions,
)
from preflight.transport.slurm.steps import Node, decode_task, split_labelled

DOC = typed({
    "hosts": {"n1": {"status": "ok"}, "n2": {"status": "ok"},
              "n3": {"status": "failed", "failure": {"stage": "probe", "reason": "x"}},
              "n4": {"status": "failed", "failure": {"stage": "slurm", "reason": "drained"}}},
    "findings": [
        {"check": "cpu-cores", "status": "fail", "hosts": ["n2"],
         "message": "n2: 0.25 effective cores, far below the median 2"},
        {"check": "env", "status": "warn", "hosts": ["n1"], "message": "n1: NCCL_DEBUG=INFO"},
        {"check": "reachable", "status": "could-not-check", "hosts": ["n3"],
         "message": "n3: could not check (probe): probe exited 1"},
        {"check": "reachable", "status": "could-not-check", "hosts": ["n4"],
         "message": "n4: could not check (slurm): node drained"},
        {"check": "allreduce", "status": "fail", "hosts": [], "message": "cluster stall"},
    ],
})


def test_the_nodes_a_report_failed_and_why():
    # Warnings and cluster-wide findings drain nobody; a node Slurm already holds back is
    # not drained again by us.
    assert failed_nodes(DOC) == {
        "n2": "preflight: cpu-cores: 0.25 effective cores, far below the median 2",
        "n3": "preflight: reachable: could not check (probe): probe exited 1"}
    # n1 passed only what the report has a passing finding of it for (the warning counts).
    assert passed_nodes(DOC) == {"n1": frozenset({"env"})}


def test_a_reason_is_one_bounded_line():
    r = reason("x: " + "a\nb " * 200)
    assert r.startswith(PREFIX) and "\n" not in r and len(r) == REASON_MAX


def test_drain_is_idempotent_and_leaves_an_operator_s_drain_alone():
    want = {"n2": "preflight: cpu-cores: slow", "n3": "preflight: env: bad", "n5": "x"}
    states = {"n2": Node("n2", "10.0.0.2", "drained", "preflight: cpu-cores: slow"),
              "n3": Node("n3", "10.0.0.3", "drained", "disk swap")}
    acts = {a.node: a for a in drain_actions(want, states)}
    assert acts["n2"].command is None and acts["n2"].why == "already drained for this reason"
    assert acts["n3"].command is None and "someone else (disk swap)" in acts["n3"].why
    assert acts["n5"].command is None  # not a Slurm node
    fresh = drain_actions(want, {"n2": Node("n2", "a", "idle")})
    assert fresh[0].command == ("scontrol", "update", "nodename=n2", "state=drain",
                                "reason=preflight: cpu-cores: slow")
    assert fresh[0].line() == ("scontrol update nodename=n2 state=drain "
                               "'reason=preflight: cpu-cores: slow'")


def test_resume_only_what_preflight_drained():
    states = {"n1": Node("n1", "a", "drained", "preflight: cpu-cores: slow"),
              "n2": Node("n2", "a", "drained*", "maintenance"),
              "n3": Node("n3", "a", "idle")}
    ran = frozenset({"cpu-cores"})
    acts = resume_actions({"n1": ran, "n2": ran, "n3": ran}, states)
    assert [(a.node, a.command) for a in acts] == [
        ("n1", ("scontrol", "update", "nodename=n1", "state=resume")), ("n2", None)]


def test_resume_only_once_the_check_that_drained_it_passed_again():
    states = {"n1": Node("n1", "a", "drained", "preflight: bandwidth: slow host: 95 Mbit/s"),
              "n2": Node("n2", "a", "drained", "preflight: cpu-cores: 0.25 effective cores")}
    findings: list[dict[str, Any]] = [
        {"check": "cpu-cores", "status": "pass", "hosts": ["n1", "n2"], "message": "ok"},
        {"check": "bandwidth", "status": "skip", "hosts": ["n1", "n2"], "message": "n/a"}]
    doc = {"hosts": {"n1": {"status": "ok"}, "n2": {"status": "ok"}}, "findings": findings}
    report = typed(doc)
    acts = {a.node: a for a in resume_actions(passed_nodes(report), states, checks_of(report))}
    assert acts["n2"].command == ("scontrol", "update", "nodename=n2", "state=resume")
    assert acts["n1"].command is None  # --no-network-tests: bandwidth never ran
    assert acts["n1"].why.startswith("drained for bandwidth, which this report did not pass "
                                     "on it: left drained (preflight: bandwidth: slow host")
    findings[1]["status"] = "warn"  # measured, and only a warning: it passes
    report = typed(doc)
    acts = {a.node: a for a in resume_actions(passed_nodes(report), states, checks_of(report))}
    assert acts["n1"].command is not None


def test_the_checks_a_drain_reason_names():
    checks = {"nofile", "shm", "cpu-cores"}
    assert drained_for("preflight: cpu-cores: 0.25 effective cores", checks) == ("cpu-cores",)
    # preflight health writes several; a message's own "; host: ..." is not a check.
    assert drained_for("preflight: nofile: limit 1024; shm: 64 MiB; good2: x", checks) == \
        ("nofile", "shm")
    assert drained_for("disk swap: soon", checks) == ()  # not preflight's


def test_node_states_that_run_no_step():
    assert Node("n", "a", "idle").usable is None and Node("n", "a", "mixed").usable is None
    assert Node("n", "a", "drained", "disk").usable == "node drained (disk)"
    assert Node("n", "a", "down*", "Not responding").usable == \
        "node down*: slurmd not responding (Not responding)"


def test_srun_output_is_told_apart_per_task_and_long_lines_survive():
    import base64
    payload = '{"schema": 1, "x": "' + "y" * 3000 + '"}\n'
    b64 = base64.b64encode(payload.encode()).decode()
    lines = [b64[i:i + 76] for i in range(0, len(b64), 76)]
    text = "\n".join([" 1: PREFLIGHT-NODE n2"] + [f" 1: {ln}" for ln in lines]
                     + [" 1: PREFLIGHT-EXIT 0", " 0: PREFLIGHT-NODE n1", " 0: PREFLIGHT-EXIT 3"])
    tasks = split_labelled(text)
    assert tasks[1][0] == "PREFLIGHT-NODE n2" and tasks[0][0] == "PREFLIGHT-NODE n1"
    assert decode_task(tasks[1][1:]) == (payload.rstrip("\n") + "\n", 0)
    assert decode_task(tasks[0][1:]) == ("", 3)
    assert decode_task(["abc"]) [1] is None  # no exit line: the step was cut off


def test_a_drain_that_cannot_ask_slurm_says_so_in_one_line_of_its_own(tmp_path, monkeypatch):
    # A Slurm client with no controller to ask prints an error a line, five of them here.
    sinfo = tmp_path / "sinfo"
    sinfo.write_text("#!/bin/sh\n"
                     "echo 'sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error: "
                     "Unknown host' >&2\n"
                     "echo 'sinfo: error: fetch_config: DNS SRV lookup failed' >&2\n"
                     "echo 'sinfo: error: _establish_config_source: failed to fetch config' >&2\n"
                     "echo 'sinfo: error: one more' >&2\n"
                     "echo 'sinfo: fatal: Could not establish a configuration source' >&2\n"
                     "exit 1\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    said = drain_now({"n2": "cpu-cores: watch: n2 rank 1 holds its peers back"})
    assert said == ["not drained: sinfo: fatal: Could not establish a configuration source"]
