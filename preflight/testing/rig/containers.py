"""The simulated hosts' containers: rootful Podman in each host with its own store beside the
shared one that holds the job's image (built by scripts/setup.sh, no registry), its own
/dev/shm, RDMA devices where asked, and the faults of a job's image (another image under
the tag, no image, no runtime)."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess

from preflight.testing.rig.system import (
    CGROUP_CPUSET,
    TESTENV,
    BedState,
    SimHost,
    own_cpuset,
    run,
)

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


class ContainerParts(BedState):
    """A Testbed's container part (with containers=True)."""

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
    def _containers_on_own_cpus() -> None:
        """Gives Podman's cgroupfs parent in the cpuset hierarchy the CPUs of the process
        that builds the testbed, where those are a cpuset of their own (a test lane): runc
        puts each container in a cpuset under that parent, which sets its processes' CPUs,
        and they would otherwise run on every CPU of the machine, beside another lane's
        work. Made after _libpod_cgroups is read, so close() removes it."""
        own = own_cpuset()
        if own is None or own == CGROUP_CPUSET:
            return
        parent = os.path.join(CGROUP_CPUSET, "libpod_parent")
        os.makedirs(parent, exist_ok=True)
        for name in ("cpuset.mems", "cpuset.cpus"):
            with open(os.path.join(own, name)) as src:
                value = src.read().strip()
            try:
                with open(os.path.join(parent, name), "w") as dst:
                    dst.write(value)
            except OSError:
                pass  # a container of another testbed still holds other CPUs under it

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
