"""SSH connections through Fabric with verified host keys, and failures worded as findings."""

from __future__ import annotations

import base64
import errno
import hashlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import paramiko
from fabric import Config, Connection

from preflight.model.host import Host, HostFailure, Stage
from preflight.transport.ssh import hostcert, knownhosts
from preflight.transport.ssh.wake import ChannelWake

log = logging.getLogger(__name__)


def quiet_paramiko() -> None:
    """Paramiko's transport thread logs tracebacks (e.g. on a missing banner); we word
    those failures ourselves, so its logger only speaks when asked for debug output."""
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        logging.getLogger("paramiko").setLevel(logging.CRITICAL + 1)


def fingerprint(key: paramiko.PKey) -> str:
    """Returns the key's OpenSSH-style SHA256 fingerprint."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class UnknownHostKey(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey, files: Sequence[str],
                 hint: str = "") -> None:
        self.hostname, self.key, self.files, self.hint = hostname, key, tuple(files), hint
        super().__init__(f"host key for {hostname} not found in {', '.join(files)}")


class RefusedHostKey(paramiko.SSHException):
    """A key (or host certificate) known_hosts forbids: @revoked, or a certificate that
    does not hold."""

    def __init__(self, hostname: str, reason: str) -> None:
        self.hostname, self.reason = hostname, reason
        super().__init__(f"host key of {hostname} refused: {reason}")


class JumpFailed(paramiko.SSHException):
    """The connection to a ProxyJump hop failed: the host behind it was never tried."""

    def __init__(self, hop: Host, error: BaseException) -> None:
        self.hop, self.error = hop, error
        super().__init__(f"jump host {hop.name}: {error}")


# The plain host key algorithms paramiko offers, for each key type a known_hosts line names.
_ALGORITHMS = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256")}


def _algorithms(key_type: str) -> tuple[str, ...]:
    return _ALGORITHMS.get(key_type, (key_type,))


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Checks every server key against known_hosts as OpenSSH does (knownhosts.py): the
    client holds no keys of its own, so paramiko hands each key here. Unknown keys are
    refused (StrictHostKeyChecking=yes) or, with accept_new, recorded; a changed or revoked
    key is always refused; a host certificate is accepted when a trusted CA signed it."""

    def __init__(self, host: Host, known: knownhosts.KnownHosts, accept_new: bool) -> None:
        self.host, self.known, self.accept_new = host, known, accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        names = self.host.key_names
        blob, key_type = key.asbytes(), key.get_name()
        cert = getattr(key, "public_blob", None)
        cert_problem = ""
        if cert is not None and cert.key_type in hostcert.CERT_TYPES:
            principals = [self.host.ssh.host_key_alias or self.host.address, self.host.name]
            why = hostcert.verify(self.known, names, principals, cert.key_blob, blob)
            if why is None:
                log.debug("%s: host certificate accepted", self.host.name)
                return
            cert_problem = f"its host certificate is refused: {why}"
        match = knownhosts.check_key(self.known, names, key_type, blob)
        if match.status is knownhosts.Status.KNOWN:
            return
        if match.status is knownhosts.Status.REVOKED:
            raise RefusedHostKey(hostname, f"{key_type} {fingerprint(key)} is marked "
                                 f"@revoked ({match.entry.where if match.entry else ''})")
        if match.status is knownhosts.Status.CHANGED:
            assert match.entry is not None
            old = paramiko.PKey.from_type_string(match.entry.key_type, match.entry.key)
            raise paramiko.BadHostKeyException(hostname, key, old)
        if cert_problem:
            raise RefusedHostKey(hostname, cert_problem)
        if self.accept_new and self.host.ssh.known_hosts:
            knownhosts.append(self.host.ssh.known_hosts[0], knownhosts.line_for(
                names[:1], key_type, key.get_base64(), self.host.ssh.hash_known_hosts))
            log.info("accepted new host key %s for %s", fingerprint(key), names[0])
            return
        hint = ""
        other = knownhosts.known_types(self.known, names)
        if other:
            hint = f" (known_hosts has a {', '.join(other)} key for it)"
        elif self.known.for_names(names, "cert-authority"):
            hint = " (a @cert-authority line covers it, but the host offered no certificate)"
        raise UnknownHostKey(hostname, key, self.host.ssh.known_hosts, hint)


class _KeyOrder(paramiko.Transport):
    """A transport that asks for host key algorithms in a given order (OpenSSH asks first
    for the types known_hosts holds for the host, and for certificates where a CA is
    trusted for it)."""

    order: tuple[str, ...] = ()

    @property
    def preferred_keys(self) -> tuple[str, ...]:
        offered = super().preferred_keys
        return tuple([k for k in self.order if k in offered] +
                     [k for k in offered if k not in self.order])


def key_order(host: Host, known: knownhosts.KnownHosts) -> tuple[str, ...]:
    """The host key algorithms to ask for first: certificates when a CA covers the host,
    then the key types known for it."""
    names = host.key_names
    first: list[str] = []
    if known.for_names(names, "cert-authority"):
        first += [t for t in hostcert.CERT_TYPES if not t.startswith("ssh-rsa")]
    for key_type in knownhosts.known_types(known, names):
        first += _algorithms(key_type)
    return tuple(first)


def _transport_factory(order: tuple[str, ...]) -> Callable[..., paramiko.Transport]:
    def make(*args: Any, **kwargs: Any) -> paramiko.Transport:
        t = _KeyOrder(*args, **kwargs)
        t.order = order
        return t
    return make


class _JumpSocket:
    """The direct-tcpip channel through a jump host, as the socket of the transport to the
    host behind it. paramiko closes that socket from the closing thread while its transport
    thread may still be sending or receiving (a window adjust): a packet sent after the
    channel's CLOSE made OpenSSH on the jump host drop the whole shared session ("data
    packet referred to nonexistent channel"), and with it every other host behind it (seen:
    6 of 32 hosts lost in one run). Here close waits for the send or receive under way (at
    most the transport's 0.1 s poll) and nothing is sent or read after it."""

    def __init__(self, chan: paramiko.Channel) -> None:
        self._chan, self._lock, self._done = chan, threading.Lock(), False
        self._timeout: Optional[float] = None
        # Never chan.fileno(): closing its pipe races the jump host's transport thread,
        # which then dies of EBADF and takes every host behind it along (wake.py).
        self._wake = ChannelWake(chan)

    def settimeout(self, timeout: Optional[float]) -> None:
        self._timeout = timeout
        self._chan.settimeout(timeout)

    def send(self, data: bytes) -> int:
        with self._lock:
            if self._done:
                raise OSError(errno.EPIPE, "jump channel closed")
            return int(self._chan.send(data))

    def recv(self, n: int) -> bytes:
        # Wait for data without the lock (sends must not wait behind an idle read), then
        # take it, and the window adjust it may send, under the lock.
        ch = self._chan
        self._wake.arm()
        if not (ch.recv_ready() or ch.closed or ch.eof_received):
            if not self._wake.wait(self._timeout if self._timeout is not None else 3600.0):
                raise socket.timeout()
        with self._lock:
            return b"" if self._done else bytes(ch.recv(n))

    def close(self) -> None:
        with self._lock:
            self._done = True
            self._chan.close()

    @property
    def _closed(self) -> bool:  # paramiko's stop_thread reads the socket's _closed
        return self._done or bool(self._chan.closed)

    def __getattr__(self, name: str) -> Any:  # getpeername, ...
        return getattr(self._chan, name)


class _Behind(Connection):  # type: ignore[misc]  # Fabric is untyped
    """A connection through a jump host: its socket is a _JumpSocket."""

    def open_gateway(self) -> Any:
        sock = super().open_gateway()
        return _JumpSocket(sock) if isinstance(sock, paramiko.Channel) else sock


@dataclass
class _HopState:
    hop: Host
    lock: threading.Lock = field(default_factory=threading.Lock)
    error: Optional[BaseException] = None


class _Gateway(_Behind):
    """A ProxyJump hop, shared by every host behind it (one SSH session to the bastion, as
    OpenSSH's ControlMaster would keep, instead of one per host: a bastion's MaxStartups
    would refuse a fan-out). Opened once under a lock; a failure is remembered, so the
    hosts behind a dead bastion fail at once with its reason."""

    _pf: _HopState  # set with object.__setattr__: Fabric turns attributes into config

    def open(self) -> Any:
        state = self._pf
        with state.lock:
            if state.error is not None:
                raise JumpFailed(state.hop, state.error)
            if self.is_connected:
                return None
            try:
                return super().open()
            except Exception as e:
                state.error = e
                raise JumpFailed(state.hop, e) from e


def _fabric_config() -> Config:
    """A Fabric config of the connection's own. Fabric's Connection() writes into its config
    (inline_ssh_env is not a real attribute, so it becomes a config key and a merge): one
    config shared by threads raced, and a connection read an empty one ("No attribute or
    config key found for 'forward_agent'"; 12 of 1,600 constructions in 32 threads here).
    Its empty SSHConfig stops Fabric from reading ~/.ssh/config itself: inventory.resolve
    has already applied it, the way OpenSSH does. About 0.3 ms each."""
    return Config(ssh_config=paramiko.SSHConfig())


_gateways: dict[tuple[Any, ...], _Gateway] = {}
_gateways_lock = threading.Lock()


def _gateway(hops: tuple[Host, ...], connect_timeout: float, accept_new: bool) -> _Gateway:
    key = (hops, connect_timeout, accept_new)
    with _gateways_lock:
        gw = _gateways.get(key)
        if gw is None:
            before = _gateway(hops[:-1], connect_timeout, accept_new) if len(hops) > 1 else None
            gw = _gateways[key] = _connection(hops[-1], connect_timeout, accept_new,
                                              before, _Gateway)
            object.__setattr__(gw, "_pf", _HopState(hops[-1]))
        return gw


def close_gateways() -> None:
    """Closes every jump-host session (at the end of a run)."""
    with _gateways_lock:
        for gw in _gateways.values():
            try:
                gw.close()
            except Exception:
                pass
        _gateways.clear()


def connection(host: Host, connect_timeout: float, accept_new: bool) -> Connection:
    """Returns an unopened Fabric Connection whose client verifies host keys, through the
    host's ProxyJump hops if it has any."""
    gateway = _gateway(host.ssh.jump, connect_timeout, accept_new) if host.ssh.jump else None
    return _connection(host, connect_timeout, accept_new, gateway,
                       _Behind if gateway is not None else Connection)


def _connection(host: Host, connect_timeout: float, accept_new: bool,
                gateway: Optional[Connection], kind: type[Connection]) -> Connection:
    timeout = max(1, int(round(host.ssh.connect_timeout or connect_timeout)))
    known = knownhosts.load(host.ssh.known_hosts)
    for warning in known.warnings:
        _warn_once(warning)
    kwargs: dict[str, object] = {
        "banner_timeout": timeout,
        "auth_timeout": timeout,
        "channel_timeout": timeout,
        "allow_agent": bool(os.environ.get("SSH_AUTH_SOCK")),
        "look_for_keys": not host.ssh.identity_files,
        "transport_factory": _transport_factory(key_order(host, known)),
    }
    if host.ssh.identity_files:
        kwargs["key_filename"] = [f for f in host.ssh.identity_files if os.path.exists(f)]
    conn = kind(host=host.address, user=host.ssh.user, port=host.ssh.port, connect_timeout=timeout,
                connect_kwargs=kwargs, config=_fabric_config(), gateway=gateway)
    client: paramiko.SSHClient = conn.client
    # Fabric installs AutoAddPolicy and loads no known_hosts: the policy decides every key.
    client.set_missing_host_key_policy(HostKeyPolicy(host, known, accept_new))
    return conn


_warned: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        log.warning("%s", text)


def preflight_failure(host: Host) -> Optional[HostFailure]:
    """Returns a failure that needs no network to see: none of the identity files exists and
    there is no ssh-agent to offer a key (OpenSSH skips a missing IdentityFile; with nothing
    left to offer, it could only fail)."""
    if os.environ.get("SSH_AUTH_SOCK"):
        return None
    for hop in (*host.ssh.jump, host):
        if hop.ssh.identity_files and not any(os.path.exists(f) for f in hop.ssh.identity_files):
            where = "" if hop is host else f"jump host {hop.name}: "
            return HostFailure(Stage.AUTH, f"{where}identity file "
                               f"{', '.join(hop.ssh.identity_files)} does not exist")
    return None


def classify(exc: BaseException, stage: Stage, host: Host, connect_timeout: float) -> HostFailure:
    """Returns the failure an exception means at a stage, worded for an operator."""
    where = f"{host.address}:{host.ssh.port}"
    if isinstance(exc, JumpFailed):
        inner = classify(exc.error, Stage.CONNECT, exc.hop, connect_timeout)
        return HostFailure(inner.stage, f"through jump host {exc.hop.name}: {inner.reason}")
    if isinstance(exc, paramiko.ChannelException) and host.ssh.jump:
        return HostFailure(Stage.CONNECT, f"jump host {host.ssh.jump[-1].name} could not open a "
                           f"connection to {where}: {exc.text}")
    if isinstance(exc, RefusedHostKey):
        return HostFailure(Stage.HOST_KEY, f"host key refused for {where}: {exc.reason}")
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostFailure(Stage.HOST_KEY, (
            f"host key CHANGED for {where}: known_hosts has {fingerprint(exc.expected_key)}, "
            f"host offered {fingerprint(exc.key)}; refused (possible man-in-the-middle). "
            f"If the change is expected: ssh-keygen -R '{exc.hostname}'"))
    if isinstance(exc, UnknownHostKey):
        return HostFailure(Stage.HOST_KEY, (
            f"host key unknown: {where} offered {exc.key.get_name()} {fingerprint(exc.key)}, "
            f"under {' or '.join(host.key_names)}{exc.hint}, not in "
            f"{', '.join(exc.files) or 'any known_hosts file'}; refused. Verify it and add it "
            f"to known_hosts (ssh-keyscan), or pass --accept-new-host-keys"))
    if isinstance(exc, paramiko.AuthenticationException):
        return HostFailure(Stage.AUTH, f"authentication refused for user {host.ssh.user!r} at "
                           f"{where}: {exc}")
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        codes = {getattr(e, "errno", None) for e in exc.errors.values()}
        if codes == {errno.ECONNREFUSED}:
            return HostFailure(Stage.CONNECT, f"connection refused at {where} (is sshd running?)")
        if codes & {errno.EHOSTUNREACH, errno.ENETUNREACH}:
            return HostFailure(Stage.CONNECT, f"no route to host {host.address}")
        return HostFailure(Stage.CONNECT, f"cannot connect to {where}: {exc}")
    if isinstance(exc, socket.gaierror):
        return HostFailure(Stage.CONNECT, f"cannot resolve {host.address!r}: {exc.strerror}")
    if isinstance(exc, (socket.timeout, TimeoutError)) and stage is Stage.CONNECT:
        return HostFailure(Stage.CONNECT, f"no TCP connection to {where} within "
                           f"{connect_timeout:.0f} s")
    if isinstance(exc, paramiko.SSHException) and stage is Stage.CONNECT:
        msg = str(exc)
        # paramiko says "No existing session" or "Error reading SSH protocol banner" when the
        # port accepts TCP but no SSH server ever speaks: say that plainly.
        if "banner" in msg.lower() or "no existing session" in msg.lower():
            return HostFailure(Stage.CONNECT, f"{where} accepted TCP but sent no SSH banner "
                               f"within {connect_timeout:.0f} s (not an SSH server, or hung)")
        return HostFailure(Stage.CONNECT, f"SSH handshake with {where} failed: {msg}")
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return HostFailure(stage, f"no route to host {host.address} during {stage.value}")
    if isinstance(exc, EOFError) or (isinstance(exc, OSError) and stage is Stage.CONNECT):
        return HostFailure(stage, f"connection to {where} closed during {stage.value}: "
                           f"{type(exc).__name__} {exc}".rstrip())
    if stage is Stage.UPLOAD and isinstance(exc, OSError):
        return HostFailure(Stage.UPLOAD, f"upload of the probe failed: "
                           f"{exc.strerror or exc}")
    return HostFailure(stage, f"{type(exc).__name__}: {exc}"[:500])
