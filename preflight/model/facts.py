"""Typed facts of one host, as the probe reported them (parsed by collect/parse.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Union

from preflight.model.gpufacts import GPU_SOURCES as GPU_SOURCES
from preflight.model.gpufacts import GpuDevice as GpuDevice
from preflight.model.gpufacts import GpuFacts as GpuFacts
from preflight.model.gpufacts import GpuSource as GpuSource
from preflight.model.gpufacts import PaddleFacts as PaddleFacts
from preflight.model.netfacts import IbPort as IbPort
from preflight.model.netfacts import Interface as Interface
from preflight.model.netfacts import NeighbourTable as NeighbourTable
from preflight.model.netfacts import NetworkFacts as NetworkFacts


@dataclass(frozen=True)
class SectionError:
    """A probe section that failed on the host, or whose data could not be parsed."""

    message: str


@dataclass(frozen=True)
class SystemFacts:
    hostname: str
    kernel: str
    arch: str
    os: str
    python: str


@dataclass(frozen=True)
class CpuQuota:
    version: int
    quota_us: int
    period_us: int
    cores: float


@dataclass(frozen=True)
class OtherWork:
    """CPU used over the probe's sampling window by everything but the probe, where the job
    will run: the cgroup that holds the quota, else the CPUs of its affinity ("host")."""

    scope: str
    busy_cores: float
    window_s: float


@dataclass(frozen=True)
class CpuFacts:
    logical: int
    affinity: int
    effective: float
    utilization: float
    loadavg: tuple[float, ...]
    quota: Optional[CpuQuota] = None
    model: Optional[str] = None
    other_work: Optional[OtherWork] = None
    pressure_avg10: Optional[float] = None  # PSI cpu "some avg10", percent
    threads_per_core: Optional[int] = None  # SMT: 2 (or more) when on
    smt_active: Optional[bool] = None
    # Where the job's container is allowed fewer cores than the host (effective is then
    # the container's): the host's own effective cores, which other work shares.
    host_effective: Optional[float] = None

    @property
    def free_cores(self) -> float:
        """Effective cores that other work left free over the sample; without a cgroup-aware
        sample (older probes, saved reports), the 1-minute load average stands in. In a
        container narrower than its host: its cores, or what other work left of the host's,
        whichever is fewer."""
        if self.other_work is not None:
            busy = self.other_work.busy_cores
        else:
            busy = self.loadavg[0] if self.loadavg else self.utilization * self.logical
        left = (self.host_effective if self.host_effective is not None else self.effective) - busy
        return max(0.0, round(min(self.effective, left), 3))


@dataclass(frozen=True)
class MemoryFacts:
    total_bytes: Optional[int]
    available_bytes: Optional[int]
    # The smallest memory limit of the probe's cgroup and those above it (a Slurm step's
    # --mem, a systemd slice); None: none below the machine's memory.
    cgroup_limit_bytes: Optional[int] = None


@dataclass(frozen=True)
class ShmFacts:
    size_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class TmpFacts:
    """The temp directory ($TMPDIR, else /tmp): Python, compilers and launchers write there."""

    path: str
    size_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Limit:
    soft: Optional[int]  # None: unlimited
    hard: Optional[int]


@dataclass(frozen=True)
class LimitsFacts:
    nofile: Limit
    memlock: Limit


@dataclass(frozen=True)
class FileFact:
    path: str
    sha256: Optional[str] = None
    size: Optional[int] = None
    error: Optional[str] = None  # e.g. "FileNotFoundError: No such file or directory"


@dataclass(frozen=True)
class FilesFacts:
    files: tuple[FileFact, ...] = ()


@dataclass(frozen=True)
class PortsFacts:
    tcp: tuple[int, ...]


@dataclass(frozen=True)
class EnvFacts:
    vars: tuple[tuple[str, str], ...]  # sorted (name, value); secret-looking values redacted


# The probe's answer in place of the Paddle section under --no-paddle (probe_script.py writes
# the same words): the user did not ask, so the Paddle checks are "not requested".
PADDLE_NOT_REQUESTED = "not collected (preflight ran with --no-paddle)"


def not_requested(section: object) -> bool:
    """Whether a section is missing because the user chose not to collect it."""
    return isinstance(section, SectionError) and section.message == PADDLE_NOT_REQUESTED


@dataclass(frozen=True)
class ClockFacts:
    epoch: float  # the host's own time when the probe finished
    skew_s: Optional[float] = None  # host minus controller (the middle of what it can be)
    # How far the true skew may lie from skew_s either way: half the command's own delays
    # (its start after the controller sent it, its output's way back). None: not bounded
    # (a report from before it was).
    uncertainty_s: Optional[float] = None


@dataclass(frozen=True)
class ContainerIntent:
    """What the runtime was asked for, as its inspect reports it (docker and podman)."""

    network_mode: Optional[str] = None
    ipc_mode: Optional[str] = None
    shm_size_bytes: Optional[int] = None
    devices: tuple[str, ...] = ()  # host paths of the device nodes passed
    gpu_requests: tuple[str, ...] = ()  # --gpus (DeviceRequests), CDI names among devices


@dataclass(frozen=True)
class ContainerCgroup:
    """What the cgroup and CPU affinity of the job's container's process let it use, read
    on the host (docker/podman --cpus, --cpuset-cpus, --memory, or what a Slurm step or
    Kubernetes set above it)."""

    affinity: int  # CPUs it may run on (its cpuset)
    cpuset: str = ""  # those CPUs, as cpuset.cpus writes them ("0-7")
    quota: Optional[CpuQuota] = None  # the smallest CFS quota above it
    memory_limit_bytes: Optional[int] = None  # the smallest memory limit above it

    @property
    def cores(self) -> float:
        """The cores it may use: its affinity, capped by its quota."""
        cores = float(self.affinity) if self.affinity else float("inf")
        return min(cores, self.quota.cores) if self.quota is not None else cores


@dataclass(frozen=True)
class ContainerFacts:
    """The job's container on one host: which image it is, what it took to start, and what
    its process really runs with (read through /proc/<pid>: the truth where it differs from
    what inspect says). The Paddle section of the same facts is the container's Paddle."""

    runtime: str
    image: Optional[str] = None  # the reference the job uses (a tag, a digest)
    name: Optional[str] = None  # the running container named instead of an image
    image_id: Optional[str] = None  # the image's ID (config digest); None: not on the host
    missing: Optional[str] = None  # why the image (or container) is not there
    start_s: Optional[float] = None  # the container's start, as the job would start it
    error: Optional[str] = None  # the image is there but the container did not start: why
    # The runtime cannot run on the host at all (not on the login user's PATH): why.
    no_runtime: Optional[str] = None
    unread: Optional[str] = None  # it started (or runs) but its process was not read: why
    host_network: Optional[bool] = None  # shares the host's network namespace
    host_ipc: Optional[bool] = None  # shares the host's IPC namespace (and its /dev/shm)
    shm: Optional[ShmFacts] = None
    limits: Optional[LimitsFacts] = None
    infiniband: tuple[str, ...] = ()  # /dev/infiniband entries inside
    nvidia: tuple[str, ...] = ()  # /dev/nvidia* entries inside
    gpu_env: tuple[tuple[str, str], ...] = ()  # CUDA_/NVIDIA_VISIBLE_DEVICES inside
    intent: Optional[ContainerIntent] = None
    env: Optional[EnvFacts] = None  # its process's training variables (the job's)
    cgroup: Optional[ContainerCgroup] = None

    @property
    def subject(self) -> str:
        return f"container {self.name}" if self.name else f"image {self.image}"


@dataclass(frozen=True)
class HostFacts:
    """Every section of one probe run; each is its facts or the SectionError that replaced it."""

    schema: int
    system: Union[SystemFacts, SectionError]
    cpu: Union[CpuFacts, SectionError]
    memory: Union[MemoryFacts, SectionError]
    shm: Union[ShmFacts, SectionError]
    limits: Union[LimitsFacts, SectionError]
    network: Union[NetworkFacts, SectionError]
    ports: Union[PortsFacts, SectionError]
    env: Union[EnvFacts, SectionError]
    files: Union[FilesFacts, SectionError]
    gpu: Union[GpuFacts, SectionError]
    paddle: Union[PaddleFacts, SectionError]
    clock: Union[ClockFacts, SectionError]
    probe_elapsed_s: float = 0.0
    tmp: Union[TmpFacts, SectionError, None] = None  # None: a probe from before it reported it
    # None: the job runs on the host. Else the job's container, whose Paddle is `paddle`.
    container: Union[ContainerFacts, SectionError, None] = None

    def job_cpu(self) -> Union[CpuFacts, SectionError]:
        """The CPU the job gets: the host's, narrowed to what its container's cgroup and
        affinity allow where it runs in one (--cpus, --cpuset-cpus): a container limited to
        one core on a 64-core host has one core, and at most what other work leaves of the
        host's."""
        cpu, c = self.cpu, self.container
        if not isinstance(cpu, CpuFacts) or not isinstance(c, ContainerFacts) or \
                c.cgroup is None or c.cgroup.cores >= cpu.effective:
            return cpu
        g = c.cgroup
        return replace(cpu, effective=round(g.cores, 3), quota=g.quota or cpu.quota,
                       affinity=min(cpu.affinity, g.affinity or cpu.affinity),
                       host_effective=cpu.effective)

    def nccl_interface(self, ip: str) -> Optional[str]:
        """The interface NCCL's bootstrap must be told (NCCL_SOCKET_IFNAME) for the job to
        reach this host at ip; None where the host's environment sets it already."""
        env = dict(self.env.vars) if isinstance(self.env, EnvFacts) else {}
        if "NCCL_SOCKET_IFNAME" in env or not isinstance(self.network, NetworkFacts):
            return None
        iface = self.network.interface_with(ip)
        return iface.name if iface else None

    def visible_gpus(self) -> int:
        """The GPUs a job started from the host's environment can use: those of
        CUDA_VISIBLE_DEVICES where the login environment sets it (indices or UUIDs; empty or
        -1: none), never more than NVML lists; else all NVML lists."""
        return len(self.gpu_labels())

    def gpu_labels(self) -> tuple[str, ...]:
        """The visible GPUs as Paddle's launcher names them for --devices: the entries of
        CUDA_VISIBLE_DEVICES where it is set (indices or UUIDs, up to the first invalid one,
        where CUDA stops), else 0..n-1 of the GPUs NVML lists."""
        listed = len(self.gpu.devices) if isinstance(self.gpu, GpuFacts) else 0
        env = dict(self.env.vars) if isinstance(self.env, EnvFacts) else {}
        visible = env.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return tuple(str(i) for i in range(listed))
        ids = []
        for part in visible.split(","):
            part = part.strip()
            if not part or part.startswith("-"):
                break  # CUDA stops at the first invalid entry
            ids.append(part)
        return tuple(ids[:listed])

    def gloo_interface(self, ip: str) -> Optional[str]:
        """Returns the interface gloo must be told to bind (GLOO_SOCKET_IFNAME) for the job to
        reach this host at ip: the one holding ip. None when the host's own environment
        already sets it, or when no interface holds ip (gloo then binds where the hostname
        resolves)."""
        env = dict(self.env.vars) if isinstance(self.env, EnvFacts) else {}
        if "GLOO_SOCKET_IFNAME" in env or not isinstance(self.network, NetworkFacts):
            return None
        iface = self.network.interface_with(ip)
        return iface.name if iface else None
