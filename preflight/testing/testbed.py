"""A simulated cluster on this machine: network namespaces, one real sshd per host (root only).

Used by the test suite and by `preflight demo`. Every namespace, process and cgroup it makes
is recorded and removed by close() (also after a failure); nothing is found by name pattern,
so a crashed earlier run or a parallel one is never touched. Traffic stays inside the
namespaces it made: a bridge in a "switch" namespace, the hosts, and a client namespace
from which preflight connects.
"""

from __future__ import annotations

import os
import re
import resource
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
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
# With containers: the host's own Podman configuration and state (its store beside the
# shared, read-only one), and its own /dev/shm (Podman's lock lives there; a host's shm is
# its own on a real cluster too).
CONTAINERS_INIT = """\
mount --bind {dir}/etc-containers /etc/containers
mount -t tmpfs -o size={shm},mode=1777 tmpfs /dev/shm
"""
# An RDMA host, as the kernel shows one (the rig's kernel has no RDMA device): an ACTIVE
# InfiniBand port in /sys/class/infiniband and the verbs node in /dev/infiniband, each an
# overlay on this host's own view (sysfs and devtmpfs take no new entries), /dev/pts kept.
RDMA_INIT = """\
r={dir}/rdma
mount -t overlay -o lowerdir=/sys/class,upperdir=$r/sys-up,workdir=$r/sys-work overlay /sys/class
mount --move /dev/pts $r/pts
mount -t overlay -o lowerdir=/dev,upperdir=$r/dev-up,workdir=$r/dev-work overlay /dev
mount --move $r/pts /dev/pts
"""
RDMA_PORT = {"state": "4: ACTIVE", "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}
UVERBS = (231, 192)  # /dev/infiniband/uverbs0, as the kernel numbers it

# Podman as the rig runs it: runc (crun refuses this kernel's hybrid cgroups), cgroupfs (no
# systemd), events in a file, and host networking by default: the bridge network would change
# this machine's own namespace (a bridge, iptables chains, ip_forward). The sandbox cannot
# raise rlimits, so the defaults stay within the machine's hard limits.
CONTAINERS_CONF = """\
[containers]
netns = "host"
default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{dir}/containers/events.log"
tmp_dir = "{dir}/containers/tmp"
"""
STORAGE_CONF = """\
[storage]
driver = "overlay"
graphroot = "{dir}/containers/storage"
runroot = "{dir}/containers/run"

[storage.options]
additionalimagestores = [{shared}]
"""
# The store scripts/setup.sh builds the job's image into, and the image.
IMAGES = os.path.join(TESTENV, "images", "storage")
IMAGE = "localhost/preflight-paddle:3.3.1"

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


class Testbed:
    """N simulated hosts; use as a context manager so close() always runs."""

    def __init__(self, n_hosts: int, base_dir: Optional[str] = None,
                 names: Optional[Sequence[str]] = None, root_login: bool = True,
                 shared_tmp: bool = False, containers: bool = False,
                 rdma: Sequence[str] = ()) -> None:
        why = can_run()
        if why:
            raise TestbedError(f"cannot build a simulated cluster: {why}")
        self.id = secrets.token_hex(3)
        # Not under /tmp: each host gets a private /tmp, and sshd must still see the keys.
        self.base = tempfile.mkdtemp(prefix=f"preflight-testbed-{self.id}-",
                                     dir=base_dir or "/var/tmp")
        self.subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"
        self.switch_ns = f"pf{self.id}-sw"
        self.client_ns = f"pf{self.id}-cl"
        self.client_address = f"{self.subnet}.2"
        self.namespaces: list[str] = []
        self.cgroups: list[str] = []
        self.users: list[str] = []
        self.neigh_before: dict[int, int] = {}  # the ARP limits it raised, as they were
        # False: sshd refuses root (a real cluster's shape: only users log in).
        self.root_login = "prohibit-password" if root_login else "no"
        self.hosts: dict[str, SimHost] = {}
        # True: every host's /tmp is one directory, as on a shared scratch filesystem or
        # with several slurmd on one machine (the real shape where names in /tmp collide).
        self.shared_tmp = os.path.join(self.base, "shared-tmp") if shared_tmp else None
        names = list(names or [f"h{i + 1}" for i in range(n_hosts)])
        # True: every host runs rootful Podman with its own store and /dev/shm (the job's
        # image from the shared store scripts/setup.sh builds).
        self.containers = containers
        # Hosts with an ACTIVE RDMA port and its verbs device (with containers only: the
        # overlaid /dev then gets its /dev/shm from them).
        self.rdma = frozenset(rdma)
        if self.rdma and not containers:
            raise TestbedError("rdma hosts need containers=True")
        self.libpod_cgroups = self._libpod_cgroups() if containers else set()
        self._closed = False
        try:
            self._build(names)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ building
    def _netns(self, ns: str) -> None:
        run(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _plug(self, ns: str, port: str, address: str) -> None:
        """Connects namespace ns to the bridge with a veth; its end is eth0."""
        sw = self.switch_ns
        run(["ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0",
             "netns", ns])
        run(["ip", "-n", sw, "link", "set", port, "master", "br0", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def _fit_neighbours(self, n_hosts: int) -> None:
        """Raises the machine's ARP table limits so that every host (and the client) can
        hold an entry for every other, with room to spare; records what they were."""
        need = 2 * (n_hosts + 2) ** 2
        before = neigh_limits()
        if before.get(3, need) >= need:
            return
        self.neigh_before = before
        set_neigh_limits({1: max(before.get(1, 0), need // 4),
                           2: max(before.get(2, 0), need // 2), 3: need})

    def _build(self, names: Sequence[str]) -> None:
        self._fit_neighbours(len(names))
        self.client_dir = os.path.join(self.base, "client")
        os.makedirs(self.client_dir)
        self.identity = os.path.join(self.client_dir, "id_ed25519")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "preflight-testbed",
             "-f", self.identity])
        self.authorized_keys = os.path.join(self.base, "authorized_keys")
        shutil.copy(self.identity + ".pub", self.authorized_keys)
        self.known_hosts = os.path.join(self.client_dir, "known_hosts")
        self._netns(self.switch_ns)
        run(["ip", "-n", self.switch_ns, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.switch_ns, "link", "set", "br0", "up"])
        self._netns(self.client_ns)
        self._plug(self.client_ns, "vcl", self.client_address)
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        for i, name in enumerate(names):
            host = SimHost(name=name, ns=f"pf{self.id}-{i}", address=f"{self.subnet}.{10 + i}",
                           dir=os.path.join(self.base, "hosts", name),
                           shared_tmp=self.shared_tmp)
            for sub in ("root", "tmp", "cgroup-hold"):
                os.makedirs(os.path.join(host.dir, sub))
            os.makedirs(host.tmp, exist_ok=True)
            os.chmod(host.tmp, 0o1777)
            if self.containers:
                self._podman_config(host)
            if name in self.rdma:
                self._rdma_tree(host)
            self._netns(host.ns)
            self._plug(host.ns, f"v{i}", host.address)
            self._new_host_key(host)
            self.hosts[name] = host
            self._host_cgroups(host)
        self.write_known_hosts()
        self.etc_hosts = os.path.join(self.base, "etc-hosts")
        with open(self.etc_hosts, "w") as fh:
            fh.write("127.0.0.1 localhost\n::1 localhost\n")
            fh.writelines(f"{h.address} {h.name}\n" for h in self.hosts.values())
        for host in self.hosts.values():
            self.start_sshd(host.name)
        self.wait_listening(list(self.hosts))

    def _podman_config(self, host: SimHost, shared: bool = True) -> None:
        """The host's /etc/containers: its own store and state, the shared image store
        (unless shared is False: then the job's image is not on this host)."""
        etc = os.path.join(host.dir, "etc-containers")
        for sub in ("storage", "run", "tmp"):
            os.makedirs(os.path.join(host.dir, "containers", sub), exist_ok=True)
        os.makedirs(etc, exist_ok=True)
        for name in ("policy.json", "registries.conf"):
            if os.path.exists(f"/etc/containers/{name}"):
                shutil.copy(f"/etc/containers/{name}", os.path.join(etc, name))
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nofile = 1 << 20 if nofile == resource.RLIM_INFINITY else nofile
        with open(os.path.join(etc, "containers.conf"), "w") as fh:
            fh.write(CONTAINERS_CONF.format(dir=host.dir, nofile=nofile, nproc=4096))
        with open(os.path.join(etc, "storage.conf"), "w") as fh:
            fh.write(STORAGE_CONF.format(dir=host.dir, shared=f'"{IMAGES}"' if shared else ""))

    def _rdma_tree(self, host: SimHost) -> None:
        """What an RDMA host's sysfs and /dev add: mlx5_0 port 1 ACTIVE, uverbs0."""
        top = os.path.join(host.dir, "rdma")
        port = os.path.join(top, "sys-up", "infiniband", "mlx5_0", "ports", "1")
        for sub in ("sys-work", "dev-work", "pts", os.path.join("dev-up", "infiniband")):
            os.makedirs(os.path.join(top, sub))
        os.makedirs(port)
        for name, text in RDMA_PORT.items():
            with open(os.path.join(port, name), "w") as fh:
                fh.write(text + "\n")
        os.mknod(os.path.join(top, "dev-up", "infiniband", "uverbs0"), 0o666 | stat.S_IFCHR,
                 os.makedev(*UVERBS))

    def _libpod_cgroups(self) -> set[str]:
        """Podman's cgroupfs parents that exist before this testbed (left alone at close)."""
        return {p for p in self._libpod_paths() if os.path.isdir(p)}

    @staticmethod
    def _libpod_paths() -> list[str]:
        top = "/sys/fs/cgroup"
        names = os.listdir(top) if os.path.isdir(top) else []
        return [os.path.join(top, n, "libpod_parent", sub) for n in names
                for sub in ("conmon", "")]

    def podman(self, name: str, *args: str, timeout: float = 60.0,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        """Runs podman inside a host's namespaces, as a session on it would."""
        host = self.hosts[name]
        assert host.sshd is not None and self.containers
        return run(["nsenter", "-t", str(host.sshd.pid), "-m", "-n", "-u", "--", "podman",
                    *args], check=check, timeout=timeout)

    def plant_image(self, name: str, step: str, tag: str = "", instruction: str = "RUN") -> str:
        """Another image under the job's tag, in this host's own store only (it shadows the
        shared one there): the shared image with one more build step (a RUN line's command,
        or with instruction="ENV" a variable the image sets). Returns the new image's ID."""
        work = os.path.join(self.hosts[name].dir, "containers", "build")
        os.makedirs(work, exist_ok=True)
        with open(os.path.join(work, "Containerfile"), "w") as fh:
            fh.write(f"FROM {tag or IMAGE}\n{instruction} {step}\n")
        self.podman(name, "build", "--quiet", "--network", "host", "--tag", tag or IMAGE,
                    work, timeout=120)
        return self.podman(name, "image", "inspect", "--format", "{{.Id}}",
                           tag or IMAGE).stdout.strip()

    def without_runtime(self, name: str) -> None:
        """Podman is not there for this host's sessions (a file that cannot run lies over
        its binary, in the host's own mount namespace), as on a node whose login PATH lacks
        the runtime or that never had it installed."""
        host = self.hosts[name]
        assert host.sshd is not None
        blank = os.path.join(host.dir, "no-podman")
        with open(blank, "w"):
            pass
        os.chmod(blank, 0o644)
        podman = shutil.which("podman") or "/usr/bin/podman"
        run(["nsenter", "-t", str(host.sshd.pid), "-m", "--", "mount", "--bind", blank,
             os.path.realpath(podman)])

    def without_image(self, name: str) -> None:
        """The job's image is not on this host (its Podman no longer sees the shared store)."""
        self._podman_config(self.hosts[name], shared=False)

    def _host_cgroups(self, host: SimHost) -> None:
        """Gives the host a cgroup of its own (cgroup v1 cpu and cpuacct), as a container or
        a Slurm job has, with a quota of the machine's cores: the simulated hosts share one
        kernel, and what runs in one host's cgroup must not count as load on the others."""
        if not os.path.isdir(CGROUP_CPU):
            return  # no cgroup v1 here: the hosts share the machine's CPUs, as they are
        hierarchies = [CGROUP_CPU]
        if os.path.isdir(CGROUP_CPUACCT) and \
                os.path.realpath(CGROUP_CPUACCT) != os.path.realpath(CGROUP_CPU):
            hierarchies.append(CGROUP_CPUACCT)
        for top in hierarchies:
            path = os.path.join(top, f"preflight-{self.id}-{host.name}")
            os.mkdir(path)
            self.cgroups.append(path)
            host.cgroups.append(path)
        host.cgroup = host.cgroups[0]
        self._set_quota(host, float(os.cpu_count() or 1))

    def _set_quota(self, host: SimHost, cores: float) -> None:
        assert host.cgroup is not None
        with open(os.path.join(host.cgroup, "cpu.cfs_period_us"), "w") as fh:
            fh.write(str(CFS_PERIOD_US))
        with open(os.path.join(host.cgroup, "cpu.cfs_quota_us"), "w") as fh:
            fh.write(str(int(cores * CFS_PERIOD_US)))

    def _into_cgroups(self, host: SimHost, pid: int) -> None:
        for path in host.cgroups:
            with open(os.path.join(path, "cgroup.procs"), "w") as fh:
                fh.write(str(pid))

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

    # ------------------------------------------------------------------ faults
    def stop_sshd(self, name: str) -> None:
        """Dead host: nothing listens on port 22 any more (connection refused)."""
        host = self.hosts[name]
        if host.sshd is not None:
            host.sshd.terminate()
            host.sshd.wait(timeout=WAIT_S)
            host.sshd = None

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

    def throttle(self, name: str, rate: str = "100mbit") -> None:
        """Rate-limits the host's link both ways with tc tbf (netem is not in this kernel):
        its eth0 shapes what it sends, its switch port what it receives."""
        for ns, dev in self._link_ends(name):
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

    def write_file(self, name: str, path: str, data: str, mode: int = 0o644) -> str:
        """Writes data at path under the host's private /root or its /tmp; returns the path."""
        host = self.hosts[name]
        for top, where in (("/root/", os.path.join(host.dir, "root")), ("/tmp/", host.tmp)):
            if path.startswith(top):
                local = os.path.join(where, path[len(top):])
                os.makedirs(os.path.dirname(local), exist_ok=True)
                with open(local, "w") as fh:
                    fh.write(data)
                os.chmod(local, mode)
                return path
        raise TestbedError(f"{path}: only the private /root and /tmp differ between hosts")

    # ------------------------------------------------------------------ real-cluster shapes
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

    # ------------------------------------------------------------------ use
    def client_cmd(self, argv: Sequence[str], user: Optional[str] = None,
                   names: bool = False) -> list[str]:
        """Returns argv wrapped to run inside the client namespace; as `user` (not root)
        and with the hosts' names resolving (their /etc/hosts, in a mount namespace of the
        command's own) when asked."""
        if user is not None:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--",
                    *argv]
        if names:
            argv = ["unshare", "--mount", "--", "sh", "-c",
                    'mount --bind "$0" /etc/hosts && exec "$@"', self.etc_hosts, *argv]
        return ["nsenter", f"--net=/run/netns/{self.client_ns}", *argv]

    def inventory(self, path: str, names: Optional[Sequence[str]] = None,
                  overrides: Optional[dict[str, dict[str, object]]] = None,
                  python: str = "python3", known_hosts: Optional[str] = None) -> str:
        """Writes a YAML inventory of the named hosts; returns its path."""
        import yaml

        hosts: dict[str, dict[str, object]] = {}
        for name in names or list(self.hosts):
            entry: dict[str, object] = {"address": self.hosts[name].address}
            entry.update((overrides or {}).get(name, {}))
            hosts[name] = entry
        doc = {"defaults": {"user": "root", "port": 22, "identity_file": self.identity,
                            "known_hosts": known_hosts or self.known_hosts, "python": python},
               "hosts": hosts}
        with open(path, "w") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False)
        return path

    def commands(self, name: str) -> list[str]:
        """Returns the command lines of the processes running in the host's namespace."""
        inode = netns_inode(self.hosts[name].ns)
        out = []
        for pid in pids_in_netns({inode} if inode else set()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    out.append(fh.read().replace(b"\0", b" ").decode("utf-8", "replace"))
            except OSError:
                continue
        return out

    def leftovers(self) -> dict[str, list[str]]:
        """Returns files preflight left in any host's /tmp (there must be none)."""
        out = {}
        for host in self.hosts.values():
            files = [f for f in os.listdir(host.tmp) if f.startswith(".preflight")]
            if files:
                out[host.name] = files
        return out

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Removes every process, cgroup, namespace and file this testbed made."""
        if self._closed:
            return
        self._closed = True
        if self.containers:  # also those off the host's network (--network none)
            for name, host in self.hosts.items():
                if host.sshd is not None and host.sshd.poll() is None:
                    try:
                        self.podman(name, "rm", "--all", "--force", "--time", "0",
                                    check=False, timeout=60)
                    except subprocess.TimeoutExpired:
                        pass
        inodes = {i for i in (netns_inode(ns) for ns in self.namespaces) if i is not None}
        procs = [p for h in self.hosts.values() for p in [h.sshd, *h.extra] if p is not None]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        # Anything still running inside our namespaces (sessions, probes, their children).
        for attempt_signal in (signal.SIGTERM, signal.SIGKILL):
            stray = pids_in_netns(inodes)
            for pid in stray:
                try:
                    os.kill(pid, attempt_signal)
                except ProcessLookupError:
                    pass
            if not wait_dead(stray, timeout=3.0):
                break
        for p in procs:
            try:
                p.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=WAIT_S)
        for path in self.cgroups:
            try:
                os.rmdir(path)
            except OSError:
                # A task still inside (it is dying): move what is left out, then remove.
                try:
                    with open(os.path.join(path, "cgroup.procs")) as fh:
                        for task in fh.read().split():
                            top = os.path.dirname(path)
                            with open(os.path.join(top, "cgroup.procs"), "w") as root:
                                root.write(task)
                    os.rmdir(path)
                except OSError:
                    pass
        if self.containers:  # Podman's cgroupfs parents, where this testbed made them
            for path in self._libpod_paths():
                if path.rstrip("/") not in {p.rstrip("/") for p in self.libpod_cgroups}:
                    try:
                        os.rmdir(path)
                    except OSError:
                        pass
        for ns in reversed(self.namespaces):
            run(["ip", "netns", "del", ns], check=False)
        for user in self.users:  # its processes died with the namespaces above
            run(["userdel", "-r", user], check=False)
        if self.neigh_before:
            try:
                set_neigh_limits(self.neigh_before)
            except OSError:
                pass  # another testbed may hold them raised: they stay as they are
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
