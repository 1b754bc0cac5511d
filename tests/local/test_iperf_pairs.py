"""iperf3 pairs for real on loopback through LocalRemote (the commands an SSH host runs): a
measurement, servers that never see their client, busy ports, missing iperf3, hostile input."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest
from support import HOSTILE

from preflight.network import nic
from preflight.network.iperf import (
    IperfOptions,
    Servers,
    client_command,
    measure_pair,
    server_command,
    streams_for,
)
from preflight.transport.local.run import LocalRemote


def need_iperf3() -> None:
    if shutil.which("iperf3") is None:
        if os.environ.get("CI"):
            pytest.fail("iperf3 missing in CI: scripts/setup.sh installs it")
        pytest.skip("iperf3 not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_one_pair_over_loopback_measures_and_leaves_no_server():
    need_iperf3()
    opts = IperfOptions(port=free_port(), seconds=1)
    servers = Servers()
    result = measure_pair(LocalRemote("a"), LocalRemote("b"), "127.0.0.1", opts, servers)
    assert result.error is None and result.received_bps and result.received_bps > 1e8
    assert servers.live == {} and not listening(opts.port)


class Recording(LocalRemote):
    """A LocalRemote that notes each command it runs."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ran: list[str] = []

    def run(self, command: str, timeout: float):
        self.ran.append(command)
        return super().run(command, timeout)


def test_a_server_that_ended_with_its_pair_is_not_signalled():
    # Its PID is free once it ended: the host may give it to any process meanwhile (on a
    # busy host it wraps around within minutes), and a kill would hit that one.
    need_iperf3()
    receiver = Recording("b")
    result = measure_pair(LocalRemote("a"), receiver, "127.0.0.1",
                          IperfOptions(port=free_port(), seconds=1), Servers())
    assert result.error is None
    assert not [c for c in receiver.ran if "kill" in c], receiver.ran


def test_parallel_streams_are_summed_and_recorded():
    need_iperf3()
    opts = IperfOptions(port=free_port(), seconds=1, streams=3)
    result = measure_pair(LocalRemote("a"), LocalRemote("b"), "127.0.0.1", opts, Servers(),
                          streams_for(100_000, 100_000, opts))
    assert result.error is None and result.streams == 3
    assert result.received_bps and result.received_bps > 1e8  # the sum of the 3 streams


def test_nic_counters_are_read_from_sysfs():
    # Loopback has the standard statistics directory: every counter there, as numbers.
    done = LocalRemote("a").run(nic.counters_command("lo"), timeout=10)
    got = nic.parse_counters(done.stdout)
    assert done.exit == 0 and "rx_dropped" in got and all(v >= 0 for v in got.values())
    assert LocalRemote("a").run(nic.counters_command("no-such0"), timeout=10).exit == 3


def test_a_server_whose_client_never_comes_is_killed_by_its_pid():
    need_iperf3()
    opts = IperfOptions(port=free_port(), seconds=1)
    servers = Servers()
    remote = LocalRemote("b")
    proc = remote.start(server_command(opts))
    key = servers.add(remote, proc)
    assert proc.read_until("Server listening", 5.0)
    servers.set_pid(key, int(proc.output().split("PREFLIGHT-PID ")[1].split()[0]))
    assert listening(opts.port)
    servers.stop_all()
    end = time.monotonic() + 5
    while listening(opts.port) and time.monotonic() < end:
        time.sleep(0.05)
    assert not listening(opts.port)


def test_busy_port_is_a_failed_measurement_naming_the_host():
    need_iperf3()
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        r = measure_pair(LocalRemote("a"), LocalRemote("b"), "127.0.0.1",
                         IperfOptions(port=port, seconds=1), Servers())
    assert r.error and r.error.startswith("iperf3 server on b did not start")


def test_missing_iperf3_is_named(tmp_path):
    env_path = os.environ["PATH"]
    (tmp_path / "sh").symlink_to("/bin/sh")
    os.environ["PATH"] = str(tmp_path)  # a host with sh but no iperf3 (nor timeout)
    try:
        r = measure_pair(LocalRemote("a"), LocalRemote("b"), "127.0.0.1", IperfOptions(),
                         Servers())
    finally:
        os.environ["PATH"] = env_path
    assert r.error == "iperf3 is not installed on b"


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_addresses_never_reach_a_shell(tmp_path, value):
    marker = tmp_path / "marker"
    cmd = client_command(value.format(m=marker), IperfOptions(seconds=1))
    subprocess.run(["/bin/bash", "-c", cmd], capture_output=True, timeout=20)
    assert not marker.exists()


def test_the_link_stage_marks_its_runs_as_the_survey():
    # Two "hosts" on this machine's loopback: the ring's two runs are the survey, each
    # reported as it ends; healthy alike, neither is retested.
    need_iperf3()
    from dataclasses import replace

    from support import cluster, same

    from preflight.model.measure import SURVEY, LinkRun
    from preflight.model.policy import Limits
    from preflight.network.orchestrate import NetworkOptions, run_link_tests

    outcomes = [replace(o, host=replace(o.host, address="127.0.0.1"))
                for o in cluster(**same(2)).outcomes]
    remotes = {o.host.name: LocalRemote(o.host.name) for o in outcomes}
    seen: list[LinkRun] = []
    net = run_link_tests(outcomes, remotes, Limits(), NetworkOptions(
        iperf=IperfOptions(port=free_port(), seconds=1, omit=0)), on_link=seen.append)
    assert [(r.sender, r.receiver, r.phase) for r in net.links] == \
        [("node01", "node02", SURVEY), ("node02", "node01", SURVEY)], net.links
    assert seen == list(net.links) and all(r.result.error is None for r in net.links)


def test_a_run_judged_by_its_rate_alone_leaves_no_warm_up_out():
    # The survey's loss is judged: its slow start is left out (-O). A retest or a fan-in is
    # judged by its rate alone, and runs for its seconds only.
    opts = IperfOptions(seconds=2)
    assert "-O 1" in client_command("10.0.0.2", opts) and opts.run_s == 3
    rate = opts.rate_only()
    assert "-O" not in client_command("10.0.0.2", rate) and rate.run_s == 2
    assert rate.seconds == opts.seconds and rate.port == opts.port
