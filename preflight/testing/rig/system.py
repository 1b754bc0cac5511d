"""The simulated cluster's ground: its constants, the host's shape (SimHost), the state its
parts share (BedState), and what they run on this machine (commands, the kernel's ARP limits,
sshd's log, processes by network namespace)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

SSHD = "/usr/sbin/sshd"
# Training environments of the simulated hosts, built by scripts/setup.sh.
TESTENV = os.environ.get("PREFLIGHT_TESTENV", "/opt/preflight-testenv")


def paddle_python(version: str) -> str:
    """Returns the interpreter of the test environment with Paddle `version` installed."""
    return os.path.join(TESTENV, f"paddle-{version}", "bin", "python")

CGROUP_CPU = "/sys/fs/cgroup/cpu"
CGROUP_CPUACCT = "/sys/fs/cgroup/cpuacct"  # where CPU use is counted (may be CGROUP_CPU)
CGROUP_CPUSET = "/sys/fs/cgroup/cpuset"
CFS_PERIOD_US = 100_000
SPIN = "while True: pass"  # other work on a host: one core busy
WAIT_S = 10.0  # every wait below is bounded by this

SSHD_CONFIG = """\
{listen}
HostKey {host_key}
PidFile {dir}/sshd.pid
AuthorizedKeysFile {authorized_keys} .ssh/authorized_keys
PermitRootLogin {root_login}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
Subsystem sftp internal-sftp
MaxStartups 500:30:1000
MaxSessions 100
LogLevel VERBOSE
"""

# Runs inside the host's network namespace and a new mount + UTS namespace. A fresh sysfs
# shows only the host's own interfaces; the cgroup mounts are carried over so quotas still
# read; /root and /tmp become the host's own so hosts share no files. Like a cluster's DNS, a
# shared /etc/hosts resolves every host's name to its address (Paddle's PS-mode gloo binds
# where the hostname resolves, and crashes when it does not).
HOST_INIT = """\
set -e
mount --make-rprivate /
mount --rbind /sys/fs/cgroup {dir}/cgroup-hold
mount -t sysfs sysfs /sys
mount --move {dir}/cgroup-hold /sys/fs/cgroup
mount --bind {dir}/root /root
mount --bind {tmp} /tmp
mount --bind {etc_hosts} /etc/hosts
{rdma}{containers}hostname {name}
exec {sshd} -D -e -f {dir}/sshd_config
"""


# A port that accepts TCP and never speaks: the "hung host". Bounded: it exits by itself.
SILENT_LISTENER = """\
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
s.settimeout(1.0)
held, end = [], time.time() + float(sys.argv[3])
while time.time() < end:
    try:
        held.append(s.accept()[0])
    except OSError:
        pass
"""


class TestbedError(RuntimeError):
    pass


# The kernel's ARP table is one for all network namespaces, with one limit (gc_thresh3, 1024
# by default): 64 simulated hosts that all talk to each other (a gloo all-reduce's full mesh)
# need 64 * 63 entries, and past the limit connections fail "No route to host" (the kernel
# logs "neighbor table overflow"). Real hosts each have their own table. The testbed raises
# the limits to fit its hosts and puts them back on close.
NEIGH = "/proc/sys/net/ipv4/neigh/default/gc_thresh{}"


def neigh_limits() -> dict[int, int]:
    out = {}
    for i in (1, 2, 3):
        try:
            with open(NEIGH.format(i)) as fh:
                out[i] = int(fh.read())
        except (OSError, ValueError):
            pass
    return out


def set_neigh_limits(limits: dict[int, int]) -> None:
    for i, value in limits.items():
        with open(NEIGH.format(i), "w") as fh:
            fh.write(str(value))


def run(cmd: Sequence[str], check: bool = True, timeout: float = 30.0,
        ) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise TestbedError(f"{shlex.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:500]}")
    return p


# sshd's lines at LogLevel VERBOSE for a connection that came, ran commands and went
# (paramiko closes its socket without a disconnect message: "Connection closed by", or
# "Transferred: ..." and "Closing connection to ...").
_SSHD_ROUTINE = re.compile(r"^(Server listening|Connection from|Accepted key|Postponed |"
                           r"Accepted publickey|Starting session|Close session|"
                           r"Received disconnect|Disconnected from|Connection closed by|"
                           r"Transferred: |Closing connection to)")
_SSHD_OPENED = re.compile(r"^Accepted publickey for \S+ from \S+ port (\d+)")
# A connection's end as its sshd session logs it: closed by the client, or broken.
_SSHD_ENDED = re.compile(r"^(?:Disconnected from|Connection (?:closed|reset) by|"
                         r"Closing connection to|Received disconnect from|Read error from|"
                         r"Timeout).* port (\d+)")


def sshd_unusual(text: str, last: int = 12) -> str:
    """From an sshd log: its last lines that are not routine, then the connections it
    accepted that have no end in the log. A session process that dies of a signal logs
    nothing, where the client closing or the network breaking is logged: once no client is
    connected, such a connection's session process was killed."""
    lines = text.splitlines()
    odd = [ln for ln in lines if ln.strip() and not _SSHD_ROUTINE.match(ln)][-last:]
    open_ports: dict[str, None] = {}  # in the order accepted; a port may be used again later
    for ln in lines:
        if m := _SSHD_OPENED.match(ln):
            open_ports[m.group(1)] = None
        elif m := _SSHD_ENDED.match(ln):
            open_ports.pop(m.group(1), None)
    if open_ports:
        odd.append(f"(connections from port {', '.join(list(open_ports)[-last:])}: no end "
                   "logged: still open, or their session process was killed)")
    return "\n".join(odd)


SHM = "/dev/shm"
_FAKETIME_STATE = re.compile(r"^(?:faketime_shm_|sem\.faketime_sem_)(\d+)$")


def remove_faketime_leftovers(before: set[str]) -> list[str]:
    """libfaketime (a host's drifting clock) keeps each process's state in /dev/shm, which
    the simulated hosts share with this machine, and removes it when the process exits; a
    process killed (the testbed's close kills what its hosts still run) leaves it behind.
    Removes those not in `before` whose process is gone; returns their names."""
    gone = []
    for name in sorted(set(os.listdir(SHM)) - before):
        m = _FAKETIME_STATE.match(name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            try:
                os.unlink(os.path.join(SHM, name))
                gone.append(name)
            except OSError:
                pass
    return gone


def can_run() -> Optional[str]:
    """Returns why a testbed cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, mounts, cgroups)"
    for tool in (SSHD, "/usr/bin/ssh-keygen", "/usr/bin/nsenter", "/usr/bin/unshare"):
        if not os.path.exists(tool):
            return f"{tool} is missing (apt-get install openssh-server openssh-client util-linux)"
    if shutil.which("ip") is None:
        return "ip (iproute2) is missing"
    return None


def usable_cpus() -> int:
    """The CPUs this process (and what it starts) may run on: its affinity, which a test
    lane's cpuset narrows; the machine's count where affinity cannot be read."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def own_cpuset() -> Optional[str]:
    """This process's directory in the cgroup v1 cpuset hierarchy, or None without one."""
    if not os.path.isdir(CGROUP_CPUSET):
        return None
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpuset" in controllers.split(","):
                    return os.path.join(CGROUP_CPUSET, path.lstrip("/")).rstrip("/")
    except (OSError, ValueError):
        return None
    return None


def proc_alive(pid: int) -> bool:
    """True while pid runs; a zombie counts as dead (init here reaps orphans slowly)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_dead(pids: Sequence[int], timeout: float = WAIT_S) -> list[int]:
    """Returns the pids still alive after waiting up to timeout."""
    end = time.monotonic() + timeout
    alive = [p for p in pids if proc_alive(p)]
    while alive and time.monotonic() < end:
        time.sleep(0.05)
        alive = [p for p in alive if proc_alive(p)]
    return alive


def netns_inode(ns: str) -> Optional[int]:
    try:
        return os.stat(f"/run/netns/{ns}").st_ino
    except OSError:
        return None


def pids_in_netns(inodes: set[int]) -> list[int]:
    """Returns the pids of live processes whose network namespace is one of inodes."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino in inodes and proc_alive(int(entry)):
                    out.append(int(entry))
            except OSError:
                continue
    return out


@dataclass
class SimHost:
    name: str
    ns: str
    address: str
    dir: str
    sshd: Optional[subprocess.Popen[bytes]] = None
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cgroup: Optional[str] = None  # its cgroup v1 cpu directory (the quota)
    cgroups: list[str] = field(default_factory=list)  # every hierarchy it was put in
    ports: list[int] = field(default_factory=lambda: [22])  # where its sshd listens
    certificate: Optional[str] = None  # its host certificate (HostCertificate), if signed
    shared_tmp: Optional[str] = None  # a /tmp it shares with other hosts (shared scratch)

    @property
    def tmp(self) -> str:
        """The host's /tmp, as seen from this machine: its own, or the one it shares."""
        return self.shared_tmp or os.path.join(self.dir, "tmp")


class BedState:
    """What the parts of a Testbed share: its state and the few methods each part calls on
    the others (the hosts part, Testbed, defines them)."""

    id: str
    base: str
    hosts: dict[str, SimHost]
    containers: bool
    rdma: frozenset[str]
    namespaces: list[str]
    cgroups: list[str]
    freezers: list[str]  # freezer cgroups (rig/stalls.py)
    scratch: list[tuple[str, str]]  # (host, path in its mount namespace) of its own filesystems
    users: list[str]
    identity: str
    known_hosts: str
    client_dir: str
    client_ns: str
    client_address: str
    switch_ns: str
    etc_hosts: str

    def start_sshd(self, name: str) -> None:
        raise NotImplementedError

    def stop_sshd(self, name: str) -> None:
        raise NotImplementedError

    def restart_sshd(self, name: str) -> None:
        raise NotImplementedError

    def wait_listening(self, names: Sequence[str], port: int = 22) -> None:
        raise NotImplementedError

    def _new_host_key(self, host: SimHost) -> None:
        raise NotImplementedError

    def _write_sshd_config(self, host: SimHost) -> None:
        raise NotImplementedError

    def _set_quota(self, host: SimHost, cores: float) -> None:
        raise NotImplementedError

    def _into_cgroups(self, host: SimHost, pid: int) -> None:
        raise NotImplementedError
