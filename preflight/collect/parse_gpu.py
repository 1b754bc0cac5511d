"""The probe's GPU and Paddle sections into facts: each GPU as NVML or nvidia-smi read it
(one vocabulary of modes and health whichever it was), the kernel log's Xid events, and the
training environment's Paddle, CUDA, cuDNN and NCCL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from preflight.collect.fields import MAX_STR, Malformed, b, f, i, items, obj, req, s
from preflight.collect.smi import parse_smi_csv
from preflight.common.gpumode import fabric, mode
from preflight.common.literal import one_of
from preflight.model import facts as F
from preflight.model.facts import GPU_SOURCES


def _xid(d: dict[str, Any]) -> tuple[Optional[tuple[tuple[str, int, str], ...]],
                                     Optional[str]]:
    x = d.get("xid")
    if not isinstance(x, dict):
        return None, None
    if "error" in x:
        return None, s(x, "error", False)
    out = []
    for n, raw in enumerate(items(x.get("events", []), "xid.events")):
        if not (isinstance(raw, list) and len(raw) == 3 and isinstance(raw[1], int)):
            raise Malformed(f"xid.events[{n}]: expected [pci, code, text]")
        out.append((str(raw[0])[:64], raw[1], str(raw[2])[:MAX_STR]))
    return tuple(out), None


def gpu(d: dict[str, Any]) -> F.GpuFacts:
    facts = _gpu(d)
    xid, why = _xid(d)
    return replace(facts, xid=xid, xid_error=why)


def _gpu(d: dict[str, Any]) -> F.GpuFacts:
    source = s(d, "source")
    if source == "nvidia-smi":
        return parse_smi_csv(req(s(d, "csv_fields")), d.get("csv", "")[:65536]
                             if isinstance(d.get("csv"), str) else "",
                             d["apps"][:65536] if isinstance(d.get("apps"), str) else None)
    if source not in ("nvml", "none"):
        raise Malformed(f"source: unknown GPU source {source!r:.40}")
    known = one_of(source, GPU_SOURCES)
    devices = []
    for n, raw in enumerate(items(d.get("devices", []), "devices")):
        x = obj(raw, f"devices[{n}]")
        if "error" in x:  # one GPU NVML could not read: its finding, the others still read
            devices.append(F.GpuDevice(index=req(i(x, "index")), name="unreadable",
                                       memory_total_mib=None, compute_capability=None,
                                       error=req(s(x, "error"))))
            continue
        devices.append(F.GpuDevice(
            index=req(i(x, "index")), name=req(s(x, "name")),
            memory_total_mib=i(x, "memory_total_mib", False),
            compute_capability=s(x, "compute_capability", False),
            uuid=s(x, "uuid", False) or "", vbios=s(x, "vbios", False),
            ecc_mode=mode(x.get("ecc_mode")), mig_mode=mode(x.get("mig_mode")),
            persistence_mode=mode(x.get("persistence_mode")),
            power_limit_w=f(x, "power_limit_w", False),
            pcie_width=i(x, "pcie_width", False), pcie_width_max=i(x, "pcie_width_max", False),
            nvlink_up=i(x, "nvlink_up", False),
            **_fabric(x.get("fabric")),
            ecc_uncorrected_volatile=i(x, "ecc_uncorrected_volatile", False),
            retired_pages_pending=_flag(x.get("retired_pages_pending")),
            remapped_rows_pending=b(x, "remapped_rows_pending"),
            remapped_rows_failure=b(x, "remapped_rows_failure"),
            clock_event_reasons=i(x, "clock_event_reasons", False),
            processes=i(x, "processes", False)))
    return F.GpuFacts(source=known, driver=s(d, "driver", False),
                      cuda_driver=s(d, "cuda_driver", False), devices=tuple(devices))


def _fabric(v: Any) -> dict[str, Any]:
    """NVML's [state, status, health mask] as the fabric's words (model/gpumode.py)."""
    if v is None:
        return {}
    if not (isinstance(v, list) and len(v) == 3
            and all(isinstance(n, int) and not isinstance(n, bool) for n in v)):
        raise Malformed("fabric: expected [state, status, health mask]")
    state, problems = fabric(*v)
    return {"fabric_state": state, "fabric_problems": problems}


def _flag(v: Any) -> Optional[bool]:
    """NVML returns feature states as ints (1 = enabled / pending)."""
    if v is None:
        return None
    if isinstance(v, (bool, int)):
        return bool(v)
    raise Malformed(f"expected a flag, got {type(v).__name__}")


def _text_or_none(v: Any) -> Optional[str]:
    """Paddle reports 'False' / '0' / None for fields a CPU build lacks: keep them as text."""
    if v is None:
        return None
    return str(v)[:256]


def paddle(d: dict[str, Any]) -> F.PaddleFacts:
    archs = d.get("cuda_archs")
    return F.PaddleFacts(
        interpreter=req(s(d, "interpreter")), available=bool(b(d, "available")),
        reason=s(d, "reason", False), python=s(d, "python", False),
        version=s(d, "version", False), commit=s(d, "commit", False),
        cuda=_text_or_none(d.get("cuda")), cudnn=_text_or_none(d.get("cudnn")),
        nccl=_text_or_none(d.get("nccl")),
        cuda_archs=tuple(int(a) for a in items(archs, "cuda_archs") if isinstance(a, int))
        if archs is not None else None,
        compiled_with_cuda=b(d, "compiled_with_cuda"),
        compiled_with_distribute=b(d, "compiled_with_distribute"),
        ps_core=b(d, "ps_core"), nccl_runtime=_text_or_none(d.get("nccl_runtime")),
        cudnn_runtime=_text_or_none(d.get("cudnn_runtime")),
        gpu_visible=i(d, "gpu_visible", False), gpu_error=s(d, "gpu_error", False),
        gpu_ops=_gpu_ops(d.get("gpu_ops")), import_s=f(d, "import_s", False),
        protobuf=s(d, "protobuf", False))


def _gpu_ops(v: Any) -> Optional[tuple[tuple[int, Optional[str]], ...]]:
    if v is None:
        return None
    out = []
    for n, raw in enumerate(items(v, "gpu_ops")):
        x = obj(raw, f"gpu_ops[{n}]")
        out.append((req(i(x, "index")), s(x, "error", False)))
    return tuple(out)
