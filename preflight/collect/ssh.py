"""SSH connections through Fabric with verified host keys, and failures worded as findings."""

from __future__ import annotations

import base64
import errno
import hashlib
import logging
import os
import socket
import threading
from typing import Optional

import paramiko
from fabric import Config, Connection

from preflight.model.host import Host, HostFailure, Stage

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
    def __init__(self, hostname: str, key: paramiko.PKey, known_hosts: Optional[str]) -> None:
        self.hostname, self.key, self.known_hosts = hostname, key, known_hosts
        super().__init__(f"host key for {hostname} not found in {known_hosts}")


class RejectUnknown(paramiko.MissingHostKeyPolicy):
    """OpenSSH's StrictHostKeyChecking=yes: an unknown host is refused, never added."""

    def __init__(self, known_hosts: Optional[str]) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        raise UnknownHostKey(hostname, key, self.known_hosts)


_known_hosts_lock = threading.Lock()


class AcceptNew(paramiko.MissingHostKeyPolicy):
    """StrictHostKeyChecking=accept-new: record an unknown host's key in known_hosts.

    Only ever asked for hosts that have no key at all; a changed key still raises
    BadHostKeyException inside paramiko before any policy is consulted."""

    def __init__(self, known_hosts: str) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _known_hosts_lock:  # many hosts answer at once; appends must not interleave
            os.makedirs(os.path.dirname(self.known_hosts) or ".", mode=0o700, exist_ok=True)
            fd = os.open(self.known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a") as fh:
                fh.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.info("accepted new host key %s for %s", fingerprint(key), hostname)


# One Fabric config for all connections: an empty SSHConfig stops Fabric from reading
# ~/.ssh/config, so what the inventory says is what is used.
_FABRIC_CONFIG = Config(ssh_config=paramiko.SSHConfig())


def connection(host: Host, connect_timeout: float, accept_new: bool) -> Connection:
    """Returns an unopened Fabric Connection whose client verifies host keys."""
    timeout = max(1, int(round(connect_timeout)))
    kwargs: dict[str, object] = {
        "banner_timeout": timeout,
        "auth_timeout": timeout,
        "channel_timeout": timeout,
        "allow_agent": bool(os.environ.get("SSH_AUTH_SOCK")),
        "look_for_keys": host.identity_file is None,
    }
    if host.identity_file:
        kwargs["key_filename"] = host.identity_file
    conn = Connection(host=host.address, user=host.user, port=host.port,
                      connect_timeout=timeout, connect_kwargs=kwargs, config=_FABRIC_CONFIG)
    client: paramiko.SSHClient = conn.client
    # Fabric installs AutoAddPolicy and loads no known_hosts: replace both.
    if host.known_hosts and os.path.exists(host.known_hosts):
        client.load_host_keys(host.known_hosts)
    if accept_new and host.known_hosts:
        client.set_missing_host_key_policy(AcceptNew(host.known_hosts))
    else:
        client.set_missing_host_key_policy(RejectUnknown(host.known_hosts))
    return conn


def preflight_failure(host: Host) -> Optional[HostFailure]:
    """Returns a failure that needs no network to see (a missing identity file)."""
    if host.identity_file and not os.path.exists(host.identity_file):
        return HostFailure(Stage.AUTH, f"identity file {host.identity_file} does not exist")
    return None


def classify(exc: BaseException, stage: Stage, host: Host, connect_timeout: float) -> HostFailure:
    """Returns the failure an exception means at a stage, worded for an operator."""
    where = f"{host.address}:{host.port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostFailure(Stage.HOST_KEY, (
            f"host key CHANGED for {where}: known_hosts has {fingerprint(exc.expected_key)}, "
            f"host offered {fingerprint(exc.key)}; refused (possible man-in-the-middle). "
            f"If the change is expected: ssh-keygen -R '{exc.hostname}'"))
    if isinstance(exc, UnknownHostKey):
        return HostFailure(Stage.HOST_KEY, (
            f"host key unknown: {where} offered {exc.key.get_name()} {fingerprint(exc.key)}, "
            f"not in {exc.known_hosts}; refused. Verify it and add it to known_hosts, or pass "
            f"--accept-new-host-keys"))
    if isinstance(exc, paramiko.AuthenticationException):
        return HostFailure(Stage.AUTH, f"authentication refused for user {host.user!r} at "
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
