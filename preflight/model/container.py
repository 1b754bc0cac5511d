"""Where the job runs when it runs in a container: the runtime, the image (or a container
already running) and the run options the job will be started with. The probe's Paddle part,
the all-reduce and the plan's launch commands run inside it, started exactly so; the host's
own part (driver, NICs, CPU, clocks) stays on the host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, get_args

# docker and podman run and inspect containers; apptainer and Slurm's pyxis
# (srun --container-image) are command shapes: they share the host's network, IPC and
# limits, and have no inspect.
Runtime = Literal["docker", "podman", "apptainer", "pyxis"]
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)
ENGINES: tuple[Runtime, ...] = ("docker", "podman")  # a daemon or libpod: run, exec, inspect


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
