"""Baselines and audits: a host's profile (what must match a known-good cluster), a recorded
baseline, and an audit's comparison settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

DEFAULT_MAX_AGE_S = 24 * 3600.0  # measurements older than this are flagged
DEFAULT_TOLERANCE = 0.2  # bandwidth may be this fraction below the baseline's

Value = Union[str, int, None]

# Profile field -> the label messages use (the same words as the checks').
LABELS = {
    "gpu_model": "GPU model", "gpu_count": "GPU count", "gpu_memory_mib": "GPU memory (MiB)",
    "compute_capability": "compute capability", "driver": "driver",
    "paddle": "paddle", "cuda": "CUDA", "cudnn": "cuDNN", "nccl": "NCCL", "python": "Python",
    "nic_speed_mbps": "NIC speed (Mbit/s)", "mtu": "MTU",
}


@dataclass(frozen=True)
class Profile:
    """What a job needs alike on every host; unknown holds the sections that failed."""

    gpu_model: Value = None
    gpu_count: Value = None
    gpu_memory_mib: Value = None
    compute_capability: Value = None
    driver: Value = None
    paddle: Value = None
    cuda: Value = None
    cudnn: Value = None
    nccl: Value = None
    python: Value = None
    nic_speed_mbps: Value = None
    mtu: Value = None
    unknown: tuple[str, ...] = ()  # "gpu: <why>" for sections the probe could not read
    # Read back closed (config.typed): a field this release would not compare is an error.
    __closed__: ClassVar[bool] = True

    def values(self) -> dict[str, Value]:
        """Returns {field: value} for every compared field, in LABELS order."""
        return {k: getattr(self, k) for k in LABELS}


@dataclass(frozen=True)
class AllReduceRef:
    """The baseline's all-reduce: busbw at its largest message size."""

    backend: str
    ranks: int
    nbytes: int
    busbw: float


@dataclass(frozen=True)
class Baseline:
    """A known-good cluster as recorded; measured_at is None when no active tests ran."""

    path: str
    taken_at: float  # epoch seconds when the recording run started
    taken_on: str  # the controller's host name
    hosts: tuple[str, ...]
    profiles: Mapping[str, Profile]
    reference: Profile
    link_bps: Optional[float] = None  # iperf3: the median host's best link
    allreduce: Optional[AllReduceRef] = None
    inventory: Optional[str] = None

    @property
    def measured(self) -> bool:
        return self.link_bps is not None or self.allreduce is not None


@dataclass(frozen=True)
class Audit:
    """A baseline and how to compare with it: the input of the baseline check."""

    baseline: Baseline
    now: float  # epoch seconds of the audit (passed in: checks read no clock)
    tolerance: float = DEFAULT_TOLERANCE
    max_age_s: float = DEFAULT_MAX_AGE_S
