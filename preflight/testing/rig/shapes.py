"""Real-cluster shapes on the simulated cluster: an unprivileged user, SSH off port 22, host
certificates from a site CA, a controller that reaches only a login node, an SSH session
that drops."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
from collections.abc import Sequence
from typing import Optional

from preflight.testing.rig.system import TESTENV, BedState, netns_inode, pids_in_netns, run


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

    def code_for(self, user: str) -> tuple[str, str]:
        """The code under test, as installed for this process (checks/ and inventory/ mapped
        in), copied where the user can read it, and the test environment's controller python
        that runs it (PYTHONPATH=the copy): the checkout and its venv may lie under a
        directory only root can enter (root's home, 0700, where root clones by default)."""
        import preflight

        code = os.path.join(self.home(user), "code")
        if not os.path.isdir(code):
            shutil.copytree(os.path.dirname(preflight.__file__), os.path.join(code, "preflight"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            run(["chmod", "-R", "a+rX", code])
        return os.path.join(TESTENV, "controller", "bin", "python"), code

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

    def drop_session(self, name: str, word: str) -> Optional[int]:
        """Drops the SSH session that runs the host's process with `word` in its command
        line, as a dropped connection or an sshd restarted under it would: its sshd session
        process is killed (SIGKILL), the process it ran is left to its fate. Returns the
        session's pid; None where no such process runs there."""
        inode = netns_inode(self.hosts[name].ns)
        for pid in pids_in_netns({inode} if inode else set()):
            try:
                if word.encode() not in _cmdline(pid):
                    continue
                up = pid
                for _ in range(4):  # the shells between it and its session, if any
                    with open(f"/proc/{up}/stat") as fh:
                        up = int(fh.read().rsplit(")", 1)[1].split()[1])
                    if _cmdline(up).startswith(b"sshd"):
                        os.kill(up, signal.SIGKILL)
                        return up
            except (OSError, ValueError, IndexError):
                continue
        return None


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read()
