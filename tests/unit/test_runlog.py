"""The results log: what a run learned survives the run, read back exactly, cut lines and
all; killed runs are found and announced once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from preflight import runlog
from preflight.collect.parse import parse_probe_output
from preflight.config.errors import InputError
from preflight.model.host import Host, HostFailure, HostOutcome, Stage
from preflight.model.measure import AllReduce, IperfResult, LinkRun, NetworkTests, SizeResult

FIXTURES = Path(__file__).parent.parent / "fixtures" / "probe"
HOSTS = [Host("a", "10.0.0.1", python="/opt/py/bin/python"), Host("b", "10.0.0.2"),
         Host("c", "10.0.0.3", roles=("worker",))]


def probe_text() -> str:
    """A probe's output captured on a simulated host (see the fixture's description)."""
    output = json.loads((FIXTURES / "paddle-3.3.1-cpu.json").read_text())["output"]
    return output if isinstance(output, str) else json.dumps(output)


def answered(host: Host) -> HostOutcome:
    text = probe_text()
    return HostOutcome(host, facts=parse_probe_output(text, received_at=1000.0),
                       elapsed_s=0.4, received_at=1000.0, probe_output=text)


def write_partial(path: str) -> None:
    log = runlog.RunLog(path)
    log.start("check", ["check", "-i", "inv.yaml"], HOSTS, 999.0, "/x/inv.yaml")
    log.host(answered(HOSTS[0]))
    log.host(HostOutcome(HOSTS[1], failure=HostFailure(Stage.CONNECT, "connection refused")))
    log.link(LinkRun("a", "b", "survey", IperfResult(sent_bps=9e8, received_bps=8.9e8,
                                                     retransmits=0, seconds=1.0)))
    log.close()


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


@pytest.mark.parametrize("content, message", [
    (b"", "no start record"),
    (b'{"kind":"host"}\n', "no start record"),
    (b'[1, 2]\n{"kind":"start"}\n', "line 1 is not a JSON record"),
    (b'{"kind":"start","log_version":99}\n', "log_version 99"),
    (b'{"kind":"start","log_version":1}\n', "line 1: bad start record"),
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
    with pytest.raises(InputError, match="line 3 is not a JSON record"):
        runlog.read(path)


def test_killed_runs_are_found_once_and_live_ones_are_not(tmp_path):
    directory = str(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    killed = os.path.join(directory, "20260101T000000-1.jsonl")
    write_partial(killed)
    _set_pid(killed, int(dead.stdout))  # that process has exited: the run was killed
    live = os.path.join(directory, "20260101T000001-2.jsonl")
    write_partial(live)
    _set_pid(live, os.getpid())  # still running (this test)
    done = os.path.join(directory, "20260101T000002-3.jsonl")
    log = runlog.RunLog(done)
    log.start("check", [], HOSTS, 1.0, None)
    log.end("go", 0)
    log.close()
    assert [r.path for r in runlog.killed_runs(directory)] == [killed]
    runlog.mark_killed(killed)
    assert runlog.killed_runs(directory) == []


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


def _set_pid(path: str, pid: int) -> None:
    lines = Path(path).read_text().splitlines()
    start = json.loads(lines[0])
    start["pid"] = pid
    lines[0] = json.dumps(start, separators=(",", ":"))
    Path(path).write_text("\n".join(lines) + "\n")
