"""The active tests' orchestration on this machine: commands, quoting, stopping, blame.

iperf3 runs for real on loopback through LocalRemote (the same commands an SSH host runs);
the all-reduce's launcher needs several hosts and is exercised on the simulated cluster."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from support import HOSTILE, G, cluster, gpu, link, same, slow_host, survey

from preflight.collect.remote import Done
from preflight.model import facts as F
from preflight.model.measure import SURVEY
from preflight.model.policy import Limits
from preflight.network import allreduce as AR
from preflight.network.iperf import (
    IperfOptions,
    Servers,
    client_command,
    measure_pair,
    server_command,
)
from preflight.network.orchestrate import allreduce_members, retest_pairs
from preflight.network.schedule import matrix_rounds
from preflight.testing.local import LocalRemote


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


# ---------------------------------------------------------------- iperf3
def test_one_pair_over_loopback_measures_and_leaves_no_server():
    need_iperf3()
    opts = IperfOptions(port=free_port(), seconds=1)
    servers = Servers()
    result = measure_pair(LocalRemote("a"), LocalRemote("b"), "127.0.0.1", opts, servers)
    assert result.error is None and result.received_bps and result.received_bps > 1e8
    assert servers.live == {} and not listening(opts.port)


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


# ---------------------------------------------------------------- retests
def test_retests_put_each_suspect_against_the_best_healthy_host():
    hosts = ["a", "b", "c", "d"]
    links = survey(hosts, slow_host("c"))
    links = [link(r.sender, r.receiver, 12 * G) if (r.sender, r.receiver) == ("b", "a")
             else r for r in links]  # b and a share the best link; a comes first by name
    assert retest_pairs(links, Limits()) == [("c", "a"), ("a", "c")]


def test_retests_repeat_a_slow_path_itself():
    hosts = ["a", "b", "c", "d"]
    links = survey(hosts, lambda s, r: 1 * G if (s, r) == ("a", "c") else 10 * G,
                   matrix_rounds)
    assert retest_pairs(links, Limits()) == [("a", "c")]
    assert retest_pairs(survey(hosts, lambda s, r: 10 * G), Limits()) == []


# ---------------------------------------------------------------- all-reduce
def members_of(c):
    remotes = {o.host.name: LocalRemote(o.host.name) for o in c.outcomes}
    return allreduce_members(c.outcomes, remotes)


def test_cpu_hosts_run_gloo_on_the_interface_holding_their_address():
    c = cluster(**same(3, gpu=F.GpuFacts("none")))
    # Give each host an eth0 with its inventory address, and one a GLOO_SOCKET_IFNAME.
    outs = []
    for o in c.outcomes:
        env = F.EnvFacts((("GLOO_SOCKET_IFNAME", "bond0"),) if o.host.name == "node03" else ())
        net = F.NetworkFacts((F.Interface("eth0", 1500, "up", None,
                                          (f"{o.host.address}/24",)),), "eth0")
        outs.append(o.__class__(o.host, facts=F.HostFacts(**{
            **o.facts.__dict__, "network": net, "env": env})))
    members, backend, left = members_of(c.__class__(tuple(outs)))
    assert backend == "gloo" and left == {}
    assert [(m.nproc, m.gloo_ifname) for m in members] == [(1, "eth0"), (1, "eth0"), (1, None)]


def test_gpu_hosts_run_nccl_with_the_smallest_gpu_count_and_leave_out_odd_hosts():
    c = cluster(node01={"gpu": gpu(8)}, node02={"gpu": gpu(4)},
                node03={"gpu": F.GpuFacts("none")},
                node04={"paddle": F.PaddleFacts("/usr/bin/python3", False, "No module")})
    members, backend, left = members_of(c)
    assert backend == "nccl" and [m.name for m in members] == ["node01", "node02"]
    assert {m.nproc for m in members} == {4}
    assert left == {"node03": "has no GPU while others do",
                    "node04": "Paddle is not importable"}


def test_a_host_holding_the_launchers_ports_is_left_out_with_the_port():
    c = cluster(node01={"gpu": F.GpuFacts("none")},
                node02={"gpu": F.GpuFacts("none"), "ports": F.PortsFacts((22, 36001))})
    members, _, left = members_of(c)
    assert [m.name for m in members] == ["node01"]
    assert left == {"node02": "port 36001 is already in use (the all-reduce needs "
                              "36000-36003; see --allreduce-port)"}


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_interpreter_never_runs_in_the_launch_command(tmp_path, value):
    marker = tmp_path / "marker"
    m = AR.Member("n", LocalRemote("n"), value.format(m=marker), "127.0.0.1")
    run_dir = str(tmp_path / ".preflight-ar-test")
    done = LocalRemote("n").run(AR.host_command(m, 0, [m], AR.AllReduceOptions(), run_dir),
                                timeout=20)
    assert not marker.exists()
    assert done.exit == 95  # no such interpreter: the unpack step stops the command


def test_stop_command_kills_the_runs_processes_and_not_itself(tmp_path):
    run_dir = str(tmp_path / ".preflight-ar-0123abcd")
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               f"{run_dir}/allreduce.py"])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                  f"{run_dir}-other/allreduce.py"])
    try:
        done = LocalRemote("n").run(AR.stop_command(run_dir), timeout=10)
        assert done.exit == 0  # the stopping shell survived its own pattern
        assert victim.wait(5) is not None
        assert bystander.poll() is None
    finally:
        for p in (victim, bystander):
            p.kill()
            p.wait()


def test_log_reason_quotes_the_error_line_and_redacts_secrets():
    out = "\n".join(AR.LOG + ln for ln in [
        "LAUNCH INFO 2026 job started", "I1121 tcp_utils.cc:132] connected",
        "Traceback (most recent call last):", "  File x.py, line 4",
        "RuntimeError: connect refused with API_TOKEN=abc123 set"])
    why = AR.log_reason(Done(1, out, ""))
    assert why == "RuntimeError: connect refused with API_TOKEN=*** set"


def test_first_failing_rank_is_the_culprit_and_the_rest_were_stopped():
    members = [AR.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in "abc"]
    results = {"b": Done(1, AR.LOG + "RuntimeError: Unable to find address for: nope0", ""),
               "a": Done(-15, "", ""), "c": Done(-15, "", "")}
    r = AR._summarise(members, "gloo", 3, ("a", "b", "c"), results, ["b"],
                      AR.AllReduceOptions(), 1.0)
    assert r.failed == {"b": "RuntimeError: Unable to find address for: nope0"}
    assert r.error == "the rank on b failed first; stopped the launcher on a, c"


def test_ranks_hung_at_the_deadline_are_all_named():
    members = [AR.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in "ab"]
    results = {"a": Done(124, AR.LOG + "LAUNCH WARNING master not ready", ""),
               "b": Done(-9, "", "")}
    # a's own `timeout` ended it first (exit 124); b was stopped: both hung, neither blamed.
    r = AR._summarise(members, "gloo", 2, ("a", "b"), results, ["a"], AR.AllReduceOptions(),
                      1.0)
    assert set(r.failed) == {"a", "b"} and r.error and r.error.startswith("no result within")
    assert r.failed["a"] == ("hung; its log last said: did not finish within the time limit; "
                             "log: LAUNCH WARNING master not ready")


def test_results_come_from_rank_zero():
    out = (AR.RESULT + '{"rank": 1, "world": 2, "backend": "gloo", "sizes": []}\n' + AR.RESULT
           + '{"rank": 0, "world": 2, "backend": "gloo", "sizes": [{"bytes": 1048576, '
           '"seconds": 0.01}]}\n' + AR.HINT + "NCCL INFO NET/Socket : Using eth0\n")
    members = [AR.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in "ab"]
    r = AR._summarise(members, "gloo", 2, ("a", "b"), {"a": Done(0, out, ""),
                      "b": Done(0, "", "")}, ["a", "b"], AR.AllReduceOptions(), 1.0)
    assert r.error is None and r.ranks == 2 and r.logs == {"a": "NCCL INFO NET/Socket : "
                                                           "Using eth0"}
    [size] = r.sizes
    assert size.nbytes == 1048576 and size.busbw == pytest.approx(1048576 / 0.01)


def test_survey_phase_is_marked():
    assert all(r.phase == SURVEY for r in survey(["a", "b", "c"], lambda s, r: G))
