"""What the job needs: mode, version pins, files, ports, limits and the job's shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, get_args

from preflight.model.container import ContainerLayer

Mode = Literal["collective", "ps"]  # Paddle's collective training, or parameter servers
MODES: tuple[Mode, ...] = get_args(Mode)
# How a PS job's trainers meet their servers (its strategy: a_sync, or GEO's k_steps): the
# modes Paddle's CPU builds run (sync PS crashes in SendBarrierOp on 2.6.2 and 3.0.0).
PsMode = Literal["async", "geo"]
PS_MODES: tuple[PsMode, ...] = get_args(PsMode)

# What a pin may name, and where its value comes from (see checks/pins.py).
PIN_NAMES = ("paddle", "driver", "cuda", "cudnn", "nccl", "python")
# Paddle's launcher: --start_port 6070 (one port per local rank; 8 GPUs a host at most here)
# and gloo's 6767 (its --start_port and --gloo_port defaults). Without --ports the plan picks
# free ports from these ranges itself, and the ports check only warns when the defaults are
# taken.
DEFAULT_PORTS = tuple(range(6070, 6078)) + (6767,)
RANK_PORTS_FROM, MASTER_PORTS_FROM = 6070, 6767


@dataclass(frozen=True)
class Pin:
    name: str
    spec: str  # a packaging specifier, e.g. ">=2.6,<3"

    def __str__(self) -> str:
        return f"{self.name}{self.spec}"


@dataclass(frozen=True)
class Limits:
    clock_skew_warn_s: float = 1.0
    clock_skew_fail_s: float = 5.0
    shm_warn_mib: int = 1024
    shm_fail_mib: int = 512  # Docker's default 64 MiB is the classic data-loader crash
    tmp_warn_mib: int = 1024  # free space in the temp directory
    tmp_fail_mib: int = 64  # full: tempfile, pip, JIT caches and launchers fail there
    nofile_warn: int = 16384
    nofile_fail: int = 4096  # the common 1024 default: "Too many open files" under load
    memlock_min_mib: int = 0  # where RDMA is used; 0: unlimited required (memlock=-1)
    # Links, relative to the cluster's own median host (see preflight/network/localise.py).
    link_warn_ratio: float = 0.75
    link_fail_ratio: float = 0.5
    link_min_gbps: float = 0.0  # an absolute floor for every link; 0: none
    link_loss_warn_pct: float = 1.0  # retransmitted segments of those sent: below, never loss
    # Loss warns above link_loss_warn_pct only with a throughput deficit (below link_warn_ratio
    # of the median host), or at this many times the cluster's typical (median) rate: TCP finds
    # a link's speed by overflowing its queue, so healthy links retransmit too.
    link_loss_outlier_ratio: float = 10.0
    busbw_min_gbytes: float = 0.0  # all-reduce busbw floor in GB/s (nccl-tests' unit); 0: none
    # NCCL's ring busbw cannot beat the slowest link; far below it, something else is wrong.
    busbw_link_ratio: float = 0.25
    # Parameter-server placement (preflight/placement/planner.py): cores one server and one trainer
    # process need, and the share of a host's effective cores in use that makes it overloaded.
    ps_server_cores: float = 1.0
    ps_trainer_cores: float = 1.0
    cpu_busy_ratio: float = 0.8


@dataclass(frozen=True)
class JobShape:
    """The job to place, in the launcher's own terms. Sizes left None follow the inventory:
    every host a worker (collective), one server and one trainer a host (ps)."""

    nproc_per_node: Optional[int] = None  # ranks per worker host; None: its GPUs (1 on CPU)
    nnodes: Optional[int] = None  # collective: worker hosts
    server_num: Optional[int] = None  # ps: parameter servers in all
    trainer_num: Optional[int] = None  # ps: trainers in all

    @property
    def explicit(self) -> bool:
        """True when the user sized the job: the plan then decides GO, and hosts left out
        of it no longer block (see preflight/judge.py)."""
        return any(v is not None for v in (self.nnodes, self.server_num, self.trainer_num))


@dataclass(frozen=True)
class PsModel:
    """The PS round's synthetic model, sized like the job's own: a sparse embedding of rows x
    dim floats sharded over the servers (each step pulls and pushes batch rows of it) and a
    small dense part."""

    rows: int = 100_000
    dim: int = 16
    batch: int = 64


PS_MODEL_LIMITS = {"rows": 100_000_000, "dim": 4096, "batch": 65536}


@dataclass(frozen=True)
class Policy:
    mode: Mode = "collective"
    ps_mode: PsMode = "async"  # ps: the mode the PS round trains in, as the job will
    ps_model: PsModel = field(default_factory=PsModel)  # ps: the PS round's model
    pins: tuple[Pin, ...] = ()
    files: tuple[str, ...] = ()  # training script and configs: must hash alike on all hosts
    ports: Optional[tuple[int, ...]] = None  # None: Paddle's defaults, the plan picks free ones
    limits: Limits = field(default_factory=Limits)
    job: JobShape = field(default_factory=JobShape)
    # Where the job runs, as the policy says it for every host (config/container.py): a
    # layer, checked, that an inventory's defaults and hosts and the command line add to.
    container: Optional[ContainerLayer] = None


# The policy keys and flags that size the job (JobShape's fields).
SHAPE_KEYS = ("nproc_per_node", "nnodes", "server_num", "trainer_num")
