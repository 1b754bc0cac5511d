"""A host's profile: the facts that must match a known-good cluster, as comparable values.

Baselines record one profile per known-good host; an audit compares new hosts' profiles with
them. Values are normalised the way the checks compare them (a CPU build's CUDA is "CPU
build" however Paddle reports it), so a baseline and an audit never differ in spelling only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Optional

from preflight.model.baseline import LABELS, Profile, Value
from preflight.model.facts import GpuFacts, HostFacts, NetworkFacts, PaddleFacts
from preflight.model.host import HostOutcome

# Which probe section each field comes from (a section that failed leaves its fields unknown).
SECTION = {"gpu_model": "gpu", "gpu_count": "gpu", "gpu_memory_mib": "gpu",
           "compute_capability": "gpu", "driver": "gpu", "paddle": "paddle", "cuda": "paddle",
           "cudnn": "paddle", "nccl": "paddle", "python": "paddle", "nic_speed_mbps": "network",
           "mtu": "network"}


def field_value(p: PaddleFacts, attr: str) -> str:
    """The field as compared: CPU builds report "no CUDA/NCCL" in several ways (None, 'False',
    '0'); they all mean the same, and a commit is shown short enough to read."""
    if attr in ("cuda", "cudnn", "nccl", "nccl_runtime", "cudnn_runtime") and \
            p.compiled_with_cuda is False:
        return "CPU build"
    v = getattr(p, attr)
    if v is None:
        return "none"
    return str(v)[:12] if attr == "commit" else str(v)


def python_minor(p: PaddleFacts) -> str:
    return ".".join((p.python or "?").split(".")[:2])


def _mixed(values: set[Value]) -> Value:
    return next(iter(values)) if len(values) == 1 else "mixed"


def _gpu(g: GpuFacts) -> dict[str, Value]:
    devs = g.devices
    return {"gpu_count": len(devs),
            "gpu_model": _mixed({d.name for d in devs}) if devs else "none",
            "gpu_memory_mib": _mixed({d.memory_total_mib for d in devs}) if devs else None,
            "compute_capability": _mixed({d.compute_capability for d in devs}) if devs else None,
            "driver": g.driver}


def _paddle(p: PaddleFacts) -> dict[str, Value]:
    if not p.available:
        return {"paddle": f"not importable ({p.reason})"[:120]}
    return {"paddle": field_value(p, "version"), "cuda": field_value(p, "cuda"),
            "cudnn": field_value(p, "cudnn"), "nccl": field_value(p, "nccl"),
            "python": python_minor(p)}


def _nic(n: NetworkFacts, address: str) -> dict[str, Value]:
    iface = n.job_interface(address)
    if iface is None:
        return {}
    return {"nic_speed_mbps": iface.speed_mbps, "mtu": iface.mtu}


def of_host(facts: HostFacts, address: str) -> Profile:
    """Returns the profile of one probed host (address: its inventory address)."""
    values: dict[str, Value] = {}
    unknown = []
    if isinstance(facts.gpu, GpuFacts):
        values.update(_gpu(facts.gpu))
    else:
        unknown.append(f"gpu: {facts.gpu.message}")
    if isinstance(facts.paddle, PaddleFacts):
        values.update(_paddle(facts.paddle))
    else:
        unknown.append(f"paddle: {facts.paddle.message}")
    if isinstance(facts.network, NetworkFacts):
        values.update(_nic(facts.network, address))
    else:
        unknown.append(f"network: {facts.network.message}")
    return Profile(**values, unknown=tuple(unknown))


def of_hosts(outcomes: Sequence[HostOutcome]) -> dict[str, Profile]:
    """Returns {host: profile} for every host whose probe answered, in order."""
    return {o.host.name: of_host(o.facts, o.host.address)
            for o in outcomes if o.facts is not None}


def reference(profiles: Sequence[Profile]) -> Profile:
    """Returns the majority value of every field over profiles (ties: the first seen)."""
    out: dict[str, Value] = {}
    for f in LABELS:
        seen = [getattr(p, f) for p in profiles if not _is_unknown(p, f)]
        if seen:
            out[f] = Counter(seen).most_common(1)[0][0]
    return Profile(**out)  # type: ignore[arg-type]


def _is_unknown(p: Profile, field: str) -> bool:
    return any(u.startswith(SECTION[field] + ":") for u in p.unknown)


def unknown_fields(p: Profile) -> set[str]:
    """Returns the fields whose section the probe could not read."""
    return {f for f in LABELS if _is_unknown(p, f)}


def show(v: Optional[Value]) -> str:
    return "unknown" if v is None else str(v)
