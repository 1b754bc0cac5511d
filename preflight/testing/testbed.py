"""A simulated cluster on this machine: network namespaces, one real sshd per host (root only).

Used by the test suite and by `preflight demo`. Every namespace, process and cgroup it makes
is recorded and removed by close() (also after a failure); nothing is found by name pattern,
so a crashed earlier run or a parallel one is never touched. Traffic stays inside the
namespaces it made: a bridge in a "switch" namespace, the hosts, and a client namespace
from which preflight connects. Testbed is the hosts; its faults, containers and real-cluster
shapes are its parts (testing/rig/)."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Optional

from preflight.testing.rig.containers import (
    IMAGE,
    IMAGES,
    ContainerParts,
)
from preflight.testing.rig.faults import Faults
from preflight.testing.rig.shapes import RealShapes
from preflight.testing.rig.sshd import HostSshd
from preflight.testing.rig.stalls import Stalls, remove_freezer, thaw_remains
from preflight.testing.rig.system import (
    CFS_PERIOD_US,
    CGROUP_CPU,
    CGROUP_CPUACCT,
    SHM,
    TESTENV,
    WAIT_S,
    SimHost,
    TestbedError,
    can_run,
    neigh_limits,
    netns_inode,
    paddle_python,
    pids_in_netns,
    remove_faketime_leftovers,
    run,
    set_neigh_limits,
    usable_cpus,
    wait_dead,
)

# What the tests and the demo use of the rig, from one place.
__all__ = ["IMAGE", "IMAGES", "SHM", "TESTENV", "WAIT_S", "SimHost", "Testbed", "TestbedError",
           "can_run", "neigh_limits", "paddle_python", "remove_faketime_leftovers",
           "remove_remains", "run", "set_neigh_limits", "usable_cpus"]


def kill_in_namespaces(names: Sequence[str]) -> None:
    """Ends every process in these network namespaces: TERM, then KILL what outlives it."""
    inodes = {i for i in (netns_inode(ns) for ns in names) if i is not None}
    for attempt_signal in (signal.SIGTERM, signal.SIGKILL):
        stray = pids_in_netns(inodes)
        for pid in stray:
            try:
                os.kill(pid, attempt_signal)
            except ProcessLookupError:
                pass
        if not wait_dead(stray, timeout=3.0):
            break


def remove_remains(testbed_id: str) -> list[str]:
    """Removes, by its id, what a testbed whose process died before close() left: the
    processes in its namespaces, its namespaces, cgroups, user and directory. Returns the
    namespaces it removed. (The ARP limits it raised stay raised: harmless.)"""
    prefix = f"pf{testbed_id}-"
    listed = run(["ip", "netns", "list"], check=False).stdout
    names = [ln.split()[0] for ln in listed.splitlines() if ln.startswith(prefix)]
    frozen = thaw_remains(testbed_id)  # a frozen process cannot end
    kill_in_namespaces(names)
    for path in frozen:
        remove_freezer(path)
    for ns in names:
        run(["ip", "netns", "del", ns], check=False)
    for top in (CGROUP_CPU, CGROUP_CPUACCT):
        hosts = glob.glob(os.path.join(top, f"preflight-{testbed_id}-*"))
        for path in [*(p for h in hosts for p in glob.glob(os.path.join(h, "process-*"))),
                     *hosts]:  # a process's own cgroup (limit_process_cpu) first
            try:
                os.rmdir(path)
            except OSError:
                pass
    run(["userdel", "-r", f"pf{testbed_id}"], check=False)  # add_user's, where it made one
    for base in glob.glob(f"/var/tmp/preflight-testbed-{testbed_id}-*"):
        shutil.rmtree(base, ignore_errors=True)
    return names


class Testbed(ContainerParts, Faults, RealShapes, Stalls, HostSshd):
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
        self.freezers: list[str] = []
        self.scratch: list[tuple[str, str]] = []
        self.users: list[str] = []
        self.neigh_before: dict[int, int] = {}  # the ARP limits it raised, as they were
        self.neigh_set: dict[int, int] = {}  # and what it raised them to
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
        if containers:
            self._containers_on_own_cpus()
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
        self.neigh_set = {1: max(before.get(1, 0), need // 4),
                          2: max(before.get(2, 0), need // 2), 3: need}
        set_neigh_limits(self.neigh_set)

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
        self._set_quota(host, float(usable_cpus()))

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
        self._thaw_all()  # a frozen process cannot end, nor one that writes to a frozen fs
        if self.containers:  # also those off the host's network (--network none)
            for name, host in self.hosts.items():
                if host.sshd is not None and host.sshd.poll() is None:
                    try:
                        self.podman(name, "rm", "--all", "--force", "--time", "0",
                                    check=False, timeout=60)
                    except subprocess.TimeoutExpired:
                        pass
        procs = [p for h in self.hosts.values() for p in [h.sshd, *h.extra] if p is not None]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        # Anything still running inside our namespaces (sessions, probes, their children).
        kill_in_namespaces(self.namespaces)
        for p in procs:
            try:
                p.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=WAIT_S)
        for path in reversed(self.cgroups):  # a process's own cgroup before its host's
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
        self._remove_freezers()
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
        # Put back only limits still as this testbed set them: a larger testbed built since
        # (tests run two modules at once) raised them further and still needs them.
        if self.neigh_before and neigh_limits() == self.neigh_set:
            try:
                set_neigh_limits(self.neigh_before)
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
