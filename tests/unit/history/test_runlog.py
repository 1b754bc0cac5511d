"""The results log: what a run learned survives the run, read back exactly, cut lines and all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from runlogtools import HOSTS, answered, write_partial

from preflight.config.errors import InputError
from preflight.history import runlog
from preflight.model.host import Host, HostFailure, SlurmNode, SshTarget, Stage, ThisMachine, Via
from preflight.model.measure import (
    AllReduce,
    FanIn,
    IperfResult,
    LinkRun,
    NetworkTests,
    NicCounters,
    PortReach,
    PsRound,
    PsTrainer,
    SizeResult,
)


def test_what_was_logged_reads_back_the_same(tmp_path):
    path = str(tmp_path / "run.jsonl")
    write_partial(path)
    got = runlog.read(path)
    assert got.hosts == HOSTS and got.argv == ["check", "-i", "inv.yaml"]
    assert got.outcomes["a"] == answered(HOSTS[0])  # facts re-parsed from the probe's text
    assert got.outcomes["b"].failure == HostFailure(Stage.CONNECT, "connection refused")
    assert "c" not in got.outcomes and not got.finished
    assert got.links[0].result.received_bps == 8.9e8
    net = got.network_tests()
    assert net is not None and net.interrupted and len(net.links) == 1
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_a_finished_run_keeps_its_network_and_end(tmp_path):
    path = str(tmp_path / "run.jsonl")
    log = runlog.RunLog(path)
    log.start("audit", ["audit"], HOSTS[:2], 5.0, None)
    link = LinkRun("a", "b", "retest", IperfResult(received_bps=1e9))
    log.link(link)
    ar = AllReduce("gloo", ("a", "b"), 2, (SizeResult(1 << 20, 0.01, 2),), None,
                   {"b": "hung"}, {"a": "hint"}, 3.5)
    log.network(NetworkTests("ring", ("a", "b"), (link,), ar, None, {"c": "no iperf3"},
                             False, 7.0, 4))
    log.end("go", 0)
    log.close()
    got = runlog.read(path)
    assert got.finished and got.end is not None and got.end["exit"] == 0
    assert got.network == NetworkTests("ring", ("a", "b"), (link,), ar, None,
                                       {"c": "no iperf3"}, False, 7.0, 4)


def test_a_line_cut_by_the_kill_is_dropped_and_the_rest_stands(tmp_path):
    path = str(tmp_path / "run.jsonl")
    write_partial(path)
    with open(path, "ab") as fh:
        fh.write(b'{"kind":"host","name":"c","probe":"{\\"sche')  # the kill, mid-write
    got = runlog.read(path)
    assert set(got.outcomes) == {"a", "b"}
    runlog.mark_killed(path)  # the next run's mark after the cut line
    got = runlog.read(path)
    assert set(got.outcomes) == {"a", "b"} and got.end is not None and got.end["killed"]


START = (b'{"kind":"start","log_version":1,"command":"check","argv":[],"started_at":1.0,'
         b'"pid":1,"controller":"c","hosts":[{"name":"a","address":"10.0.0.1"}]}\n')


@pytest.mark.parametrize("content, message", [
    (b"", "no start record"),
    (b'{"kind":"host"}\n', "no start record"),
    (b'[1, 2]\n{"kind":"start"}\n', ":1: not a JSON record"),
    (b'{"kind":"start","log_version":99}\n', "log_version 99"),
    (b'{"kind":"start","log_version":1}\n', ":1: bad start record (command: missing)"),
    (START + b'{"kind":"host","name":"a","elapsed_s":"long"}\n',
     ":2: bad host record (elapsed_s: expected a number"),
    (START + b'{"kind":"host","name":"zz","elapsed_s":1}\n', ":2: bad host record (host 'zz'"),
    (START + b'{"kind":"link","sender":"a","receiver":"b","phase":"sideways","result":{}}\n',
     ":2: bad link record (phase: 'sideways' is not one of"),
    (START + b'{"kind":"network","schedule":"ring","allreduce":{"backend":"mpi"}}\n',
     ":2: bad network record (allreduce.backend:"),
])
def test_bad_logs_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError) as e:
        runlog.read(str(path))
    assert message in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_garbage_in_the_middle_is_an_error_not_a_silent_gap(tmp_path):
    path = str(tmp_path / "run.jsonl")
    write_partial(path)
    lines = Path(path).read_bytes().split(b"\n")
    lines.insert(2, b"garbage")
    Path(path).write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=":3: not a JSON record"):
        runlog.read(path)


def test_prune_keeps_the_newest(tmp_path):
    for i in range(25):
        (tmp_path / f"2026010{i // 10}T0000{i % 10:02d}-1.jsonl").write_text("")
    (tmp_path / "other.txt").write_text("")
    runlog.prune(str(tmp_path), keep=20)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 21 and "other.txt" in left and "20260100T000000-1.jsonl" not in left


def test_is_log_tells_logs_from_reports(tmp_path):
    log, report = tmp_path / "r.jsonl", tmp_path / "r.json"
    write_partial(str(log))
    report.write_text(json.dumps({"report_version": 1}))
    assert runlog.is_log(str(log)) and not runlog.is_log(str(report))
    assert not runlog.is_log(str(tmp_path / "missing"))


def test_hosts_of_logs_before_the_transports_read_the_same(tmp_path):
    # Earlier releases logged the SSH fields beside the others, and `local` for an audit.
    path = tmp_path / "old.jsonl"
    hop = {"name": "login", "address": "10.0.0.254", "user": "ops", "port": 2222,
           "identity_files": [], "known_hosts": ["/k"], "jump": [], "local": False}
    start = {"kind": "start", "log_version": runlog.LOG_VERSION, "command": "check",
             "argv": ["check"], "started_at": 1.0, "pid": 1, "controller": "c",
             "inventory": None, "hosts": [
                 {"name": "n1", "address": "10.0.0.1", "user": "alice", "port": 22,
                  "identity_file": "/id", "known_hosts": "/kh", "jump": [hop],
                  "roles": ["worker"], "local": False, "connect_timeout": 7},
                 {"name": "me", "address": "localhost", "local": True}]}
    path.write_text(json.dumps(start) + "\n")
    n1, me = runlog.read(str(path)).hosts
    assert (n1.via, n1.ssh.user, n1.ssh.identity_files, n1.ssh.known_hosts) == (
        Via.SSH, "alice", ("/id",), ("/kh",))
    assert n1.ssh.connect_timeout == 7 and n1.roles == ("worker",)
    [login] = n1.ssh.jump
    assert (login.address, login.ssh.user, login.ssh.port) == ("10.0.0.254", "ops", 2222)
    assert me.via is Via.LOCAL and me.reached_over_ssh is None


def test_every_kind_of_target_reads_back_as_itself(tmp_path):
    # A Slurm node keeps the SSH way its re-check takes; this machine has none.
    hop = Host("login", "10.0.0.254", target=SshTarget(user="ops", port=2222))
    hosts = [Host("s1", "10.0.0.1", target=SshTarget(user="alice", jump=(hop,))),
             Host("n1", "10.0.0.2", target=SlurmNode(SshTarget(port=2200))),
             Host("me", "localhost", target=ThisMachine())]
    path = str(tmp_path / "run.jsonl")
    log = runlog.RunLog(path)
    log.start("check", ["check"], hosts, 1.0, None)
    log.close()
    assert runlog.read(path).hosts == hosts
    assert [h.via for h in hosts] == [Via.SSH, Via.SLURM, Via.LOCAL]


def test_a_new_ssh_way_keeps_the_transport():
    node = Host("n1", "10.0.0.2", target=SlurmNode(SshTarget(port=2200)))
    moved = node.with_ssh(SshTarget(port=22))
    assert moved.via is Via.SLURM and moved.ssh.port == 22
    assert Host("s1", "h").with_ssh(SshTarget(user="u")).target == SshTarget(user="u")


def test_the_network_summary_reads_back_whole(tmp_path):
    # The types write it and read it: a new measurement needs no code here.
    net = NetworkTests("ring", ("a", "b", "c"), allreduce=AllReduce(
        "gloo", ("a", "b"), 2, (SizeResult(1 << 20, 0.01, 2),), progress={"a": "done"}),
        nic_mbps={"a": 1000}, nic_counters={"a": NicCounters("eth0", {"rx_errors": 2})},
        fanin=(FanIn("a", {"b": IperfResult(received_bps=4e8), "c": IperfResult(error="x")}),),
        reach=(PortReach("a", (6070, 6767), "server", {"b": "6070: timed out"}),
               PortReach("b", (6070,), error="the listener did not start within 10 s")),
        ps=PsRound(("a", "b"), "geo", {"a": "server", "b": "trainer"},
                   (PsTrainer("b", 0, 10, 1.0, 0.1, 0.4, True),), attempts=2))
    path = str(tmp_path / "run.jsonl")
    log = runlog.RunLog(path)
    log.start("check", ["check"], HOSTS, 1.0, None)
    log.network(net)
    log.close()
    assert runlog.read(path).network == net
