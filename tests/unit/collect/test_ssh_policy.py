"""The host-key policy as OpenSSH applies it, on keys made by ssh-keygen (no network): known
passes, changed and revoked are refused always, unknown is refused or, opted in, recorded;
and connections are built safely from many threads at once (a fan-out)."""

from __future__ import annotations

import shutil
import subprocess
import threading

import paramiko
import pytest
from paramiko.buffered_pipe import BufferedPipe

from preflight.model.host import Host, SshTarget, Stage
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh import knownhosts

CLIENT = paramiko.SSHClient()  # the policy never uses it: paramiko passes its own

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                reason="needs ssh-keygen (openssh-client)")


def key(tmp_path, name: str) -> paramiko.PKey:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True)
    return paramiko.Ed25519Key(filename=str(path))


def policy(tmp_path, lines: str, host: Host, accept_new: bool = False) -> ssh.HostKeyPolicy:
    kh = tmp_path / "known_hosts"
    kh.write_text(lines)
    target = SshTarget(port=host.ssh.port, known_hosts=(str(kh),), hash_known_hosts=True)
    host = Host(host.name, host.address, target=target)
    return ssh.HostKeyPolicy(host, knownhosts.load([str(kh)]), accept_new)


def line(names: str, k: paramiko.PKey) -> str:
    return f"{names} {k.get_name()} {k.get_base64()}\n"


def test_known_changed_revoked_unknown(tmp_path):
    good, other = key(tmp_path, "good"), key(tmp_path, "other")
    node = Host("node07", "node07.cluster", target=SshTarget(port=2222))
    p = policy(tmp_path, line("[node07.cluster]:2222", good), node)
    p.missing_host_key(CLIENT, "x", good)  # known under [HostName]:port: passes
    with pytest.raises(paramiko.BadHostKeyException):
        p.missing_host_key(CLIENT, "x", other)
    p = policy(tmp_path, line("[node07]:2222", good) + "@revoked * " + line("", good)[1:],
               node)
    with pytest.raises(ssh.RefusedHostKey, match="@revoked"):
        p.missing_host_key(CLIENT, "x", good)
    p = policy(tmp_path, line("elsewhere", good), node)
    with pytest.raises(ssh.UnknownHostKey) as err:
        p.missing_host_key(CLIENT, "x", good)
    failure = ssh.classify(err.value, Stage.CONNECT, node, 10)
    assert failure.stage is Stage.HOST_KEY
    assert "under [node07.cluster]:2222 or [node07]:2222" in failure.reason


def test_accept_new_records_an_unknown_key_and_never_a_changed_one(tmp_path):
    good, other = key(tmp_path, "good"), key(tmp_path, "other")
    node = Host("node07", "10.0.0.7")
    p = policy(tmp_path, "", node, accept_new=True)
    p.missing_host_key(CLIENT, "x", good)
    recorded = knownhosts.load(list(p.host.ssh.known_hosts))
    assert recorded.entries[0].hosts.startswith("|1|")  # HashKnownHosts yes
    assert knownhosts.check_key(recorded, ["10.0.0.7"], good.get_name(),
                                good.asbytes()).status is knownhosts.Status.KNOWN
    p = policy(tmp_path, line("10.0.0.7", good), node, accept_new=True)
    with pytest.raises(paramiko.BadHostKeyException):
        p.missing_host_key(CLIENT, "x", other)


def test_key_order_asks_for_what_known_hosts_holds(tmp_path):
    rsa_line = "node07 ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDC\n"
    ca = key(tmp_path, "ca")
    kh = knownhosts.KnownHosts(tuple(e for e in (
        knownhosts.parse_line(rsa_line, "f:1"),
        knownhosts.parse_line("@cert-authority *.cluster " + line("", ca)[1:], "f:2"))
        if e is not None))
    assert ssh.key_order(Host("node07", "node07"), kh) == ("rsa-sha2-512", "rsa-sha2-256")
    order = ssh.key_order(Host("n1", "n1.cluster"), kh)
    assert order[0] == "ssh-ed25519-cert-v01@openssh.com"


def test_connections_are_built_safely_from_many_threads():
    hop = Host("login", "10.255.255.1")
    errors: list[BaseException] = []

    def build(i: int) -> None:
        try:
            for _ in range(40):
                ssh.connection(Host(f"n{i}", f"10.255.254.{i + 1}",
                                    target=SshTarget(jump=(hop,) if i % 2 else ())), 1, False)
        except Exception as e:  # Fabric's shared config raced here once
            errors.append(e)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[0]
    ssh.close_gateways()


class FakeChannel:
    """What _JumpSocket uses of a paramiko Channel, with paramiko's own buffers (data from
    the transport thread goes through them); records what was sent after close."""

    def __init__(self) -> None:
        self.in_buffer: BufferedPipe[bytes] = BufferedPipe()
        self.in_stderr_buffer: BufferedPipe[bytes] = BufferedPipe()
        self.closed = self.eof_received = False
        self.sent: list[bytes] = []
        self.after_close: list[bytes] = []

    def settimeout(self, t):
        pass

    def recv_ready(self):
        return self.in_buffer.read_ready()

    def fileno(self):
        raise AssertionError("paramiko's wake-up pipe: its close races the transport thread")

    def recv(self, n):
        return self.in_buffer.read(n)

    def send(self, data):
        (self.after_close if self.closed else self.sent).append(data)
        return len(data)

    def close(self):
        self.closed = True


def test_jump_socket_sends_nothing_after_close_and_reads_eof():
    ch = FakeChannel()
    sock = ssh._JumpSocket(ch)  # type: ignore[arg-type]  # a stand-in channel
    sock.settimeout(0.05)
    with pytest.raises(TimeoutError):  # socket.timeout: nothing to read yet
        sock.recv(10)
    ch.in_buffer.feed(b"hello")
    assert sock.recv(3) == b"hel" and sock.send(b"x") == 1
    sock.close()
    assert sock._closed  # noqa: SLF001 - paramiko's stop_thread reads it
    with pytest.raises(OSError):
        sock.send(b"late window adjust")
    assert sock.recv(10) == b"" and ch.after_close == [] and ch.sent == [b"x"]


def test_jump_socket_wakes_when_the_transport_thread_feeds_its_channel():
    ch = FakeChannel()
    sock = ssh._JumpSocket(ch)  # type: ignore[arg-type]  # a stand-in channel
    sock.settimeout(30.0)  # far longer than the test: only the feed can end the wait
    threading.Timer(0.2, ch.in_buffer.feed, (b"late",)).start()
    assert sock.recv(10) == b"late"

    def eof() -> None:  # as paramiko takes the host's EOF: noted, and the buffer closed
        ch.eof_received = True
        ch.in_buffer.close()

    threading.Timer(0.2, eof).start()
    assert sock.recv(10) == b""


def test_no_identity_file_and_no_agent_fails_before_connecting(tmp_path, monkeypatch):
    missing = str(tmp_path / "id_gone")
    hop = Host("login", "10.0.0.1", target=SshTarget(identity_files=(missing,)))
    host = Host("n1", "10.0.0.2", target=SshTarget(jump=(hop,)))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    failure = ssh.preflight_failure(host)
    assert failure is not None and failure.stage is Stage.AUTH
    assert failure.reason == f"jump host login: identity file {missing} does not exist"
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))  # the agent may have it
    assert ssh.preflight_failure(host) is None
