"""A host's GPU and Paddle facts, as the probe read them: each GPU (identity, modes, health)
from NVML or nvidia-smi, the kernel log's Xid events, and the training environment's Paddle
(re-exported by model/facts.py, where HostFacts holds them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, get_args


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    memory_total_mib: Optional[int]
    compute_capability: Optional[str]
    uuid: str = ""
    vbios: Optional[str] = None
    ecc_mode: Optional[str] = None
    mig_mode: Optional[str] = None
    persistence_mode: Optional[str] = None
    power_limit_w: Optional[float] = None
    pcie_width: Optional[int] = None
    pcie_width_max: Optional[int] = None
    nvlink_up: Optional[int] = None  # NVLink links in the up state
    # NVSwitch fabric (model/gpumode.py): "completed", "in progress", "not started"; None
    # where the GPU has none or the source cannot tell (nvidia-smi, older drivers).
    fabric_state: Optional[str] = None
    fabric_problems: tuple[str, ...] = ()
    # Health (None: not reported, e.g. by nvidia-smi, or not supported by the GPU)
    ecc_uncorrected_volatile: Optional[int] = None
    retired_pages_pending: Optional[bool] = None
    remapped_rows_pending: Optional[bool] = None
    remapped_rows_failure: Optional[bool] = None
    clock_event_reasons: Optional[int] = None  # NVML bitmask
    processes: Optional[int] = None  # compute processes already running on the GPU
    error: Optional[str] = None  # NVML could not read this GPU (GPU_IS_LOST after an Xid 79)


GpuSource = Literal["nvml", "nvidia-smi", "none"]  # where the GPU facts came from
GPU_SOURCES: tuple[GpuSource, ...] = get_args(GpuSource)


@dataclass(frozen=True)
class GpuFacts:
    source: GpuSource
    driver: Optional[str] = None
    cuda_driver: Optional[str] = None
    devices: tuple[GpuDevice, ...] = ()
    # Xid events of the kernel log since boot: (PCI address, code, text); None when the log
    # was not read (xid_error says why: dmesg_restrict for users other than root).
    xid: Optional[tuple[tuple[str, int, str], ...]] = None
    xid_error: Optional[str] = None


@dataclass(frozen=True)
class PaddleFacts:
    interpreter: str
    available: bool
    reason: Optional[str] = None  # why Paddle is not importable
    python: Optional[str] = None  # the training environment's Python version
    version: Optional[str] = None
    commit: Optional[str] = None
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    nccl: Optional[str] = None
    cuda_archs: Optional[tuple[int, ...]] = None
    compiled_with_cuda: Optional[bool] = None
    compiled_with_distribute: Optional[bool] = None
    ps_core: Optional[bool] = None
    # As loaded at run time (codes like 22103 and 90501), beside the build-time nccl/cudnn.
    nccl_runtime: Optional[str] = None
    cudnn_runtime: Optional[str] = None
    # GPU builds: the GPUs Paddle sees, and what a tiny op on each gave ((index, error or
    # None), ...); None where not tried (CPU builds, older probes).
    gpu_visible: Optional[int] = None
    gpu_ops: Optional[tuple[tuple[int, Optional[str]], ...]] = None
    gpu_error: Optional[str] = None  # why Paddle could not count its GPUs
    import_s: Optional[float] = None  # how long `import paddle` took in the probe
    protobuf: Optional[str] = None  # the protobuf version Paddle loaded
