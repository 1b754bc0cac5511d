"""Faults planted in simulated hosts, each a real one: a dead or hung sshd, a changed host key,
a CPU quota or other work in the host's cgroup, another MTU, a link shaped with tc tbf, a
port held, a full /tmp, a pulled cable, a login environment."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Optional

from preflight.testing.rig.system import (
    CFS_PERIOD_US,
    SILENT_LISTENER,
    SPIN,
    WAIT_S,
    BedState,
    TestbedError,
    run,
    usable_cpus,
)


class Faults(BedState):
    """A Testbed's faults."""

    def hang(self, name: str, seconds: float = 900.0) -> None:
        """Hung host: port 22 accepts TCP but never sends an SSH banner."""
        self.stop_sshd(name)
        host = self.hosts[name]
        host.extra.append(subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{host.ns}", sys.executable, "-c", SILENT_LISTENER,
             host.address, "22", str(seconds)], stdin=subprocess.DEVNULL))
        self.wait_listening([name])

    def change_host_key(self, name: str) -> None:
        """The host's key changes (reinstall, or a man in the middle); known_hosts keeps
        the old one."""
        self.stop_sshd(name)
        self._new_host_key(self.hosts[name])
        self.start_sshd(name)
        self.wait_listening([name])

    def limit_cpu(self, name: str, cores: float) -> str:
        """Lowers the CPU quota of the host's cgroup (sshd and all it runs) to cores."""
        host = self.hosts[name]
        if host.cgroup is None:
            raise TestbedError(f"{name} has no cgroup to limit (no cgroup v1 cpu here)")
        self._set_quota(host, cores)
        return host.cgroup

    def limit_process_cpu(self, name: str, pid: int, cores: float) -> str:
        """Moves one process of the host (a job's rank: its threads, and the children it
        starts after) into a cgroup of its own under the host's, with a quota of cores, as
        a job's container or Slurm step has: the rest of the host (sshd, what a session runs
        to watch the job) keeps the host's CPU. Returns the cgroup; close() removes it."""
        host = self.hosts[name]
        if host.cgroup is None:
            raise TestbedError(f"{name} has no cgroup to limit (no cgroup v1 cpu here)")
        path = os.path.join(host.cgroup, f"process-{pid}")
        os.mkdir(path)
        self.cgroups.append(path)
        for knob, value in (("cpu.cfs_period_us", CFS_PERIOD_US),
                            ("cpu.cfs_quota_us", int(cores * CFS_PERIOD_US)),
                            ("cgroup.procs", pid)):
            with open(os.path.join(path, knob), "w") as fh:
                fh.write(str(value))
        return path

    def unlimit_cpu(self, name: str) -> str:
        """Puts the host's quota back: every CPU the rig may use (its test lane's)."""
        return self.limit_cpu(name, float(usable_cpus()))

    def busy(self, name: str, cores: int = 1) -> list[int]:
        """Other work on the host: processes spinning on `cores` CPUs in its cgroup (as
        another job in the same container would), stopped with the testbed."""
        host = self.hosts[name]
        if host.cgroup is None:
            raise TestbedError(f"{name} has no cgroup to load (no cgroup v1 cpu here)")
        pids = []
        for _ in range(cores):
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{host.ns}", "python3", "-c",
                                  SPIN], stdin=subprocess.DEVNULL)
            host.extra.append(p)
            self._into_cgroups(host, p.pid)
            pids.append(p.pid)
        return pids

    def idle(self, name: str) -> None:
        """Stops the host's busy processes."""
        host = self.hosts[name]
        for p in host.extra:
            if isinstance(p.args, list) and p.args[-1] == SPIN and p.poll() is None:
                p.kill()
                p.wait(timeout=WAIT_S)

    def _link_ends(self, name: str) -> list[tuple[str, str]]:
        """Returns (namespace, device) of both ends of the host's link: its eth0 and the
        bridge port facing it in the switch."""
        index = list(self.hosts).index(name)
        return [(self.hosts[name].ns, "eth0"), (self.switch_ns, f"v{index}")]

    def set_mtu(self, name: str, mtu: int) -> None:
        """Gives the host's eth0 (and its switch port) another MTU."""
        for ns, dev in self._link_ends(name):
            run(["ip", "-n", ns, "link", "set", dev, "mtu", str(mtu)])

    def throttle(self, name: str, rate: str = "100mbit", sending_only: bool = False) -> None:
        """Rate-limits the host's link both ways with tc tbf (netem is not in this kernel):
        its eth0 shapes what it sends, its switch port what it receives. sending_only: its
        eth0 alone (a shaper on the host's own side, as a container's bandwidth limit)."""
        for ns, dev in self._link_ends(name)[:1 if sending_only else 2]:
            run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                 "rate", rate, "burst", "64kb", "latency", "50ms"])

    def unthrottle(self, name: str) -> None:
        """Removes the host's rate limits (both ends), if any."""
        for ns, dev in self._link_ends(name):
            run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"],
                check=False)

    def hold_port(self, name: str, port: int, seconds: float = 900.0) -> None:
        """Something else already listens on port (a previous job that did not stop)."""
        host = self.hosts[name]
        host.extra.append(subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{host.ns}", sys.executable, "-c", SILENT_LISTENER,
             "0.0.0.0", str(port), str(seconds)], stdin=subprocess.DEVNULL))
        self.wait_listening([name], port)

    def firewall(self, name: str, ports: str) -> None:
        """A firewall in the host drops what comes in to ports ("6070:6077"), as a host
        firewall that lets SSH through and nothing else does; unfirewall lifts it."""
        run(["ip", "netns", "exec", self.hosts[name].ns, "iptables", "-I", "INPUT", "-p",
             "tcp", "--dport", ports, "-j", "DROP"])

    def unfirewall(self, name: str) -> None:
        run(["ip", "netns", "exec", self.hosts[name].ns, "iptables", "-F", "INPUT"],
            check=False)

    def fill_tmp(self, name: str) -> None:
        """A full /tmp: a 1 MiB tmpfs over the host's /tmp (in its own mount namespace, so
        it goes with the host), filled to the last block."""
        host = self.hosts[name]
        if host.sshd is None:
            raise TestbedError(f"{name} has no sshd to enter")
        run(["nsenter", "-t", str(host.sshd.pid), "-m", "sh", "-c",
             "mount -t tmpfs -o size=1m tmpfs /tmp && chmod 1777 /tmp && "
             "{ dd if=/dev/zero of=/tmp/fill bs=64k count=64 2>/dev/null; true; }"])

    def link_down(self, name: str) -> None:
        """Pulls the host's cable: its eth0 goes down (link_up puts it back)."""
        run(["ip", "-n", self.hosts[name].ns, "link", "set", "eth0", "down"])

    def link_up(self, name: str) -> None:
        run(["ip", "-n", self.hosts[name].ns, "link", "set", "eth0", "up"])

    def login_env(self, name: str, lines: Sequence[str]) -> None:
        """Appends lines to the host's ~/.bashrc, which bash reads for every SSH command."""
        with open(os.path.join(self.hosts[name].dir, "root", ".bashrc"), "a") as fh:
            fh.writelines(line + "\n" for line in lines)

    @contextlib.contextmanager
    def login_env_for(self, name: str, lines: Sequence[str]) -> Iterator[None]:
        """login_env for the time of a with block: the host's ~/.bashrc is put back as it
        was after it, also when the block fails."""
        bashrc = os.path.join(self.hosts[name].dir, "root", ".bashrc")
        try:
            with open(bashrc) as fh:
                before: Optional[str] = fh.read()
        except FileNotFoundError:
            before = None
        self.login_env(name, lines)
        try:
            yield
        finally:
            if before is None:
                os.unlink(bashrc)
            else:
                with open(bashrc, "w") as fh:
                    fh.write(before)
