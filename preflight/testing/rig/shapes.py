"""Real-cluster shapes on the simulated cluster: an unprivileged user, SSH off port 22, host
certificates from a site CA, a controller that reaches only a login node."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence

from preflight.testing.rig.system import BedState, run


class RealShapes(BedState):
    """A Testbed's real-cluster shapes."""

    def add_user(self) -> str:
        """An unprivileged user, as on a real cluster: same uid on every host (the hosts
        share /etc/passwd and /home, like an NFS home), not locked (sshd refuses a locked
        account before any key), the testbed's key as ~/.ssh/id_ed25519. Removed by close()."""
        name = f"pf{self.id}"
        run(["useradd", "-m", "-s", "/bin/bash", name])
        self.users.append(name)
        run(["usermod", "-p", "*", name])
        ssh_dir = os.path.join(self.home(name), ".ssh")
        os.makedirs(ssh_dir, mode=0o700)
        shutil.copy(self.identity, os.path.join(ssh_dir, "id_ed25519"))
        # sshd reads a user's authorized keys as that user: the testbed's file is root's.
        shutil.copy(self.identity + ".pub", os.path.join(ssh_dir, "authorized_keys"))
        run(["chown", "-R", f"{name}:{name}", ssh_dir])
        return name

    def home(self, user: str) -> str:
        import pwd

        return pwd.getpwnam(user).pw_dir

    def write_as(self, user: str, path: str, text: str, mode: int = 0o600) -> str:
        """Writes a file the user owns (in their home); returns its path."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        os.chmod(path, mode)
        run(["chown", f"{user}:{user}", path])
        return path

    def listen_also(self, name: str, port: int) -> None:
        """The host's sshd listens on one more port (a cluster that moved SSH off 22)."""
        self.hosts[name].ports.append(port)
        self._write_sshd_config(self.hosts[name])
        self.restart_sshd(name)

    def new_ca(self) -> str:
        """A host CA (as an HPC site's): returns its private key's path; .pub is beside it."""
        ca = os.path.join(self.client_dir, f"host_ca_{secrets.token_hex(2)}")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "site host CA", "-f", ca])
        return ca

    def certify(self, name: str, ca: str, principals: Sequence[str]) -> None:
        """Signs the host's key with the CA for the principals; sshd presents it."""
        host = self.hosts[name]
        key = os.path.join(host.dir, "ssh_host_ed25519_key")
        run(["ssh-keygen", "-q", "-s", ca, "-I", f"{name}-host", "-h", "-n",
             ",".join(principals), "-V", "-5m:+1d", key + ".pub"])
        host.certificate = key + "-cert.pub"
        self._write_sshd_config(host)
        self.restart_sshd(name)

    def isolate_client(self, via: str) -> None:
        """The controller reaches only `via` (a login node): its address becomes a /32 with
        one host route, so every other host is "Network is unreachable" from it while the
        hosts still reach each other. reconnect_client() undoes it."""
        ns, addr = self.client_ns, self.client_address
        run(["ip", "-n", ns, "addr", "flush", "dev", "eth0"])
        run(["ip", "-n", ns, "addr", "add", f"{addr}/32", "dev", "eth0"])
        run(["ip", "-n", ns, "route", "add", f"{self.hosts[via].address}/32", "dev", "eth0"])

    def reconnect_client(self) -> None:
        ns = self.client_ns
        run(["ip", "-n", ns, "addr", "flush", "dev", "eth0"])
        run(["ip", "-n", ns, "addr", "add", f"{self.client_address}/24", "dev", "eth0"])
