"""The plan's ports tried from host to host for real on loopback through LocalRemote (the
commands an SSH host runs): ports that answer, a listener that cannot start, a port already
held, a host whose connections cannot be made at all; the ports are free again after, the
listeners stopped by the run's token."""

from __future__ import annotations

import socket
import subprocess
import sys

from preflight.model.plan import Node, Plan
from preflight.model.policy import JobShape
from preflight.network import port_reach as R
from preflight.network.port_reach import run_port_reach
from preflight.transport.local.run import LocalRemote


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True


def plan_of(ports: dict[str, tuple[int, ...]]) -> Plan:
    nodes = tuple(Node(h, "127.0.0.1", sys.executable, i, 1, p, (), ())
                  for i, (h, p) in enumerate(ports.items()))
    return Plan("ps", JobShape(), nodes=nodes)


def reach(ports: dict[str, tuple[int, ...]], pythons: dict[str, str]):
    remotes = {h: LocalRemote(h) for h in ports}
    return {r.host: r for r in run_port_reach(plan_of(ports), remotes, pythons,
                                              {h: "server" for h in ports})}


def test_ports_every_host_reaches_answer_and_are_free_again():
    p1, p2, p3 = free_ports(3)
    got = reach({"a": (p1,), "b": (p2, p3)}, {"a": sys.executable, "b": sys.executable})
    assert {h: (r.ports, dict(r.unreached), r.error) for h, r in got.items()} == {
        "a": ((p1,), {}, None), "b": ((p2, p3), {}, None)}
    assert got["b"].role == "server"
    # The listeners are gone and closed after their peers: the job can bind the ports at once.
    assert all(bindable(p) for p in (p1, p2, p3))


def test_a_port_already_held_and_a_host_that_cannot_connect_are_not_checked():
    p1, p2, p3 = free_ports(3)
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("", p2))
        held.listen(1)
        got = reach({"a": (p1,), "b": (p2,), "c": (p3,)},
                    {"a": sys.executable, "b": sys.executable, "c": "/nonexistent/python"})
    assert got["b"].error is not None and got["b"].error.startswith(f"could not listen on {p2}")
    # c's python is not there: neither its listener nor its connections ran. Nothing says a
    # port was dropped, so nobody is blamed for one.
    assert got["c"].error is not None
    assert got["a"].error is None and not got["a"].unreached
    assert all(bindable(p) for p in (p1, p3))


def test_a_listener_is_stopped_by_its_runs_token_whatever_became_of_its_channel():
    # A listener whose command the run no longer holds (its connection lost, its command read
    # as ended) still holds the job's ports: the stop finds it by the token in its command
    # line, and leaves another run's listener alone.
    p1, p2 = free_ports(2)
    ours = subprocess.Popen(R.listener_command(sys.executable, (p1,), "preflight-listen-0a1b"),
                            shell=True, stdout=subprocess.PIPE, text=True)
    theirs = subprocess.Popen(R.listener_command(sys.executable, (p2,), "preflight-listen-9f8e"),
                              shell=True, stdout=subprocess.PIPE, text=True)
    try:
        for p in (ours, theirs):
            assert p.stdout is not None and p.stdout.readline() == R.READY + "\n"
        R._stop(["a"], {"a": LocalRemote("a")}, {"a": sys.executable}, {},
                "preflight-listen-0a1b")
        assert ours.wait(5) is not None and bindable(p1)  # gone, its port free at once
        assert theirs.poll() is None and not bindable(p2)
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()
