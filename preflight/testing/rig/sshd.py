"""Each simulated host's own OpenSSH sshd: its host key, its configuration, started in the
host's namespaces (its mount and UTS namespaces of its own), waited for, stopped, restarted,
its log read for what was not routine; and the known_hosts that lists every host's key."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from typing import Optional

from preflight.testing.rig.containers import CONTAINERS_INIT, RDMA_INIT
from preflight.testing.rig.system import (
    HOST_INIT,
    SSHD,
    SSHD_CONFIG,
    WAIT_S,
    BedState,
    SimHost,
    TestbedError,
    run,
    sshd_unusual,
)


class HostSshd(BedState):
    """A Testbed's sshd part."""

    authorized_keys: str
    root_login: str  # PermitRootLogin's value

    def _new_host_key(self, host: SimHost) -> None:
        key = os.path.join(host.dir, "ssh_host_ed25519_key")
        for path in (key, key + ".pub"):
            if os.path.exists(path):
                os.unlink(path)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name, "-f", key])
        host.certificate = None  # a certificate is for the key it signed
        self._write_sshd_config(host)

    def _write_sshd_config(self, host: SimHost) -> None:
        key = os.path.join(host.dir, "ssh_host_ed25519_key")
        listen = "\n".join(f"ListenAddress {host.address}:{p}" for p in host.ports)
        text = SSHD_CONFIG.format(listen=listen, host_key=key, dir=host.dir,
                                  authorized_keys=self.authorized_keys,
                                  root_login=self.root_login)
        if host.certificate:
            text += f"HostCertificate {host.certificate}\n"
        with open(os.path.join(host.dir, "sshd_config"), "w") as fh:
            fh.write(text)

    def restart_sshd(self, name: str) -> None:
        """Restarts the host's sshd with its current configuration (bounded)."""
        self.stop_sshd(name)
        self.start_sshd(name)
        for port in self.hosts[name].ports:
            self.wait_listening([name], port)

    def write_known_hosts(self, path: Optional[str] = None) -> str:
        """Writes every host's current key to a known_hosts file; returns its path."""
        path = path or self.known_hosts
        with open(path, "w") as fh:
            for host in self.hosts.values():
                with open(os.path.join(host.dir, "ssh_host_ed25519_key.pub")) as pub:
                    kind, b64 = pub.read().split()[:2]
                fh.write(f"{host.address} {kind} {b64}\n")
        return path

    def start_sshd(self, name: str) -> None:
        host = self.hosts[name]
        boxes = CONTAINERS_INIT.format(dir=shlex.quote(host.dir), shm="1g") \
            if self.containers else ""
        rdma = RDMA_INIT.format(dir=shlex.quote(host.dir)) if name in self.rdma else ""
        script = HOST_INIT.format(dir=shlex.quote(host.dir), name=shlex.quote(name), sshd=SSHD,
                                  tmp=shlex.quote(host.tmp),
                                  etc_hosts=shlex.quote(self.etc_hosts), containers=boxes,
                                  rdma=rdma)
        log = open(os.path.join(host.dir, "sshd.log"), "ab")
        # nsenter and unshare exec (no fork), so the Popen pid ends up being sshd itself.
        host.sshd = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{host.ns}", "unshare", "--mount", "--uts", "--",
             "/bin/sh", "-c", script], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        # Before sshd accepts a session: everything a session runs inherits the cgroups.
        self._into_cgroups(host, host.sshd.pid)

    def wait_listening(self, names: Sequence[str], port: int = 22) -> None:
        """Waits until each named host listens on port (bounded)."""
        end = time.monotonic() + WAIT_S
        for name in names:
            host = self.hosts[name]
            while True:
                out = run(["nsenter", f"--net=/run/netns/{host.ns}", "ss", "-Hltn",
                           f"sport = :{port}"], check=False).stdout
                if out.strip():
                    break
                if host.sshd is not None and host.sshd.poll() is not None:
                    with open(os.path.join(host.dir, "sshd.log"), errors="replace") as fh:
                        raise TestbedError(f"sshd of {name} exited: {fh.read()[-500:]}")
                if time.monotonic() > end:
                    raise TestbedError(f"{name} does not listen on port {port}")
                time.sleep(0.05)

    def sshd_unusual(self, name: str, last: int = 12) -> str:
        """What the host's sshd logged that was not routine (see sshd_unusual)."""
        try:
            with open(os.path.join(self.hosts[name].dir, "sshd.log"), errors="replace") as fh:
                return sshd_unusual(fh.read(), last)
        except OSError:
            return ""

    def stop_sshd(self, name: str) -> None:
        """Dead host: nothing listens on port 22 any more (connection refused)."""
        host = self.hosts[name]
        if host.sshd is not None:
            host.sshd.terminate()
            host.sshd.wait(timeout=WAIT_S)
            host.sshd = None
