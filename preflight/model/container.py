"""Where the job runs when it runs in a container: the runtime, the image (or a container
already running) and the run options the job will be started with. The probe's Paddle part,
the all-reduce and the plan's launch commands run inside it, started exactly so; the host's
own part (driver, NICs, CPU, clocks) stays on the host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

# How a runtime's command lines are shaped (common/containercmd.py builds each): an engine's
# `run`/`exec`/`inspect` (Docker's and Podman's), Apptainer's `exec IMAGE`, or a Slurm
# step's `srun --container-image` (pyxis).
Shape = Literal["engine", "apptainer", "pyxis"]
# How GPUs are passed: Docker's --gpus, CDI devices (--device nvidia.com/gpu=N), Apptainer's
# --nv, or the Slurm step's own (--gres): nothing to add.
GpuStyle = Literal["docker", "cdi", "nv", "step"]


@dataclass(frozen=True)
class RuntimeTraits:
    """What preflight may do with a runtime, and how its command lines are shaped: the one
    place a runtime differs from another (a new runtime is a row of RUNTIME_TRAITS)."""

    shape: Shape
    gpus: GpuStyle
    inspects: bool  # starts a container the probe reads (inspect, its process in /proc)
    # Shares the host's network, IPC and limits (the checks read the host's), has no inspect.
    host_shared: bool
    env_file: bool  # reads the launcher's variables from a file (--env-file)
    takes_host_env: bool  # passes the host's environment in (an env file sourced before)
    limits: bool  # takes --cpus, --cpuset-cpus, --memory (pyxis: the step's own)
    rm_now: tuple[str, ...] = ()  # what `rm --force` needs to kill a sleep at once
    # Entered from a host's shell at all (pyxis's image only by srun in a job step).
    entered_from_host: bool = True


Runtime = str  # a key of RUNTIME_TRAITS (config/container.py and the report's reader check)
RUNTIME_TRAITS: dict[Runtime, RuntimeTraits] = {
    "docker": RuntimeTraits("engine", "docker", inspects=True, host_shared=False,
                            env_file=True, takes_host_env=False, limits=True),
    # Podman's rm --force waits 10 s for a process that ignores SIGTERM (a sleep as PID 1):
    # --time 0 kills it at once, as Docker's does.
    "podman": RuntimeTraits("engine", "cdi", inspects=True, host_shared=False, env_file=True,
                            takes_host_env=False, limits=True, rm_now=("--time", "0")),
    "apptainer": RuntimeTraits("apptainer", "nv", inspects=False, host_shared=True,
                               env_file=False, takes_host_env=True, limits=True),
    "pyxis": RuntimeTraits("pyxis", "step", inspects=False, host_shared=True, env_file=False,
                           takes_host_env=False, limits=False, entered_from_host=False),
}


RUNTIMES: tuple[Runtime, ...] = tuple(RUNTIME_TRAITS)
DEFAULT_RUNTIME: Runtime = "docker"


def traits(runtime: Runtime) -> RuntimeTraits:
    """The row of a runtime (one of RUNTIMES, as every spec and fact read holds)."""
    return RUNTIME_TRAITS[runtime]


@dataclass(frozen=True)
class ContainerSpec:
    """How the job's container is started (or which running one it is). Every value is
    validated where it is read (config/container.py) and reaches a command only as one
    argument of an argv, never through a shell unquoted."""

    runtime: Runtime
    image: Optional[str] = None  # an image reference (tag, digest or ID); or:
    name: Optional[str] = None  # a container already running (the job's, a dev container)
    python: str = "python3"  # the training environment's interpreter inside
    gpus: Optional[str] = None  # "all", or GPU indices / UUIDs "0,1"; None: no GPUs passed
    devices: tuple[str, ...] = ()  # device nodes or CDI names (/dev/infiniband, vendor/x=y)
    network: Optional[str] = None  # host, none, bridge, container:NAME, ...; None: default
    ipc: Optional[str] = None  # host, private, shareable, ...; None: the runtime's default
    shm_size: Optional[str] = None  # "16g"; None: the runtime's default (64 MB in Docker)
    cpus: Optional[str] = None  # "1.5": --cpus, a CFS quota of that many cores
    cpuset: Optional[str] = None  # "0-7,16": --cpuset-cpus, the CPUs it may run on
    memory: Optional[str] = None  # "64g": --memory, its cgroup's memory limit
    ulimits: tuple[tuple[str, str], ...] = ()  # (name, "soft[:hard]"), e.g. ("memlock", "-1")
    mounts: tuple[str, ...] = ()  # "SRC:DST[:OPTIONS]"
    env: tuple[tuple[str, str], ...] = ()  # set inside, in order

    @property
    def traits(self) -> RuntimeTraits:
        return RUNTIME_TRAITS[self.runtime]

    @property
    def private_ipc(self) -> bool:
        """Whether it gets an IPC namespace (and a /dev/shm) of its own, which shm_size
        sizes; on the host's or another container's (ipc host, container:NAME) it does not
        apply (Podman refuses the pair)."""
        return self.ipc is None or not (self.ipc == "host" or self.ipc.startswith("container:"))

    @property
    def running(self) -> bool:
        """Whether it names a container already running rather than an image to start."""
        return self.name is not None

    @property
    def subject(self) -> str:
        """What a finding names: the image, or the running container."""
        return f"container {self.name}" if self.name is not None else f"image {self.image}"


@dataclass(frozen=True)
class ContainerLayer:
    """One layer of `container:` as it was written (the policy's, an inventory's defaults or a
    host's, the command line's), every value already checked and in ContainerSpec's terms:
    the keys it gives, in order, a None taking back what a layer below gave."""

    given: tuple[tuple[str, Any], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.given)
