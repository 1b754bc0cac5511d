"""One machine's facts in a few lines: what the local audit shows first (CPU, memory, GPUs
with model and driver, Paddle with CUDA/cuDNN/NCCL, the network), before its findings.

It reads a host of the report, as every renderer does. A section the probe could not read
says so in its line ("error: ..."); Paddle that is not importable says "not importable" and
leaves the reason to the finding below, so the reason is not printed twice."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from preflight.model.facts import (
    CpuFacts,
    GpuFacts,
    HostFacts,
    MemoryFacts,
    NetworkFacts,
    PaddleFacts,
    SectionError,
    ShmFacts,
    SystemFacts,
    TmpFacts,
    not_requested,
)
from preflight.model.report import FailureEntry, HostEntry

_GIB = 1 << 30


def _err(section: object) -> str:
    """Why a section is not there: the probe's error, or an older probe's silence."""
    return f"error: {section.message}" if isinstance(section, SectionError) else "not reported"


def _gib(n: Optional[float]) -> str:
    return "?" if n is None else f"{n / _GIB:.1f} GiB"


def _system(facts: HostFacts, name: str) -> str:
    s = facts.system
    if not isinstance(s, SystemFacts):
        return f"{name} ({_err(s)})"
    return f"{s.hostname or name} ({s.os}, kernel {s.kernel}, {s.arch})"


def _cpu(facts: HostFacts) -> str:
    c = facts.cpu
    if not isinstance(c, CpuFacts):
        return _err(c)
    text = f"{c.model or '?'}: {c.logical} logical cores"
    if c.effective != c.logical:
        text += f", {c.effective} effective (CPU quota or affinity)"
    if c.other_work is not None:
        text += f", {c.other_work.busy_cores:.1f} busy with other work"
    return text


def _memory(facts: HostFacts) -> str:
    m, shm, tmp = facts.memory, facts.shm, facts.tmp
    parts = [f"{_gib(m.total_bytes)}, {_gib(m.available_bytes)} available"
             if isinstance(m, MemoryFacts) else _err(m)]
    parts.append(f"/dev/shm {_gib(shm.size_bytes) if isinstance(shm, ShmFacts) else _err(shm)}")
    if isinstance(tmp, TmpFacts):
        parts.append(f"{tmp.path or 'temp'} {_gib(tmp.free_bytes)} free")
    return "; ".join(parts)


def _gpus(facts: HostFacts) -> str:
    g = facts.gpu
    if not isinstance(g, GpuFacts):
        return _err(g)
    if not g.devices:
        return "none" + (" (no NVIDIA driver answered)" if g.source == "none" else "")
    kinds = Counter(f"{d.name} ({'?' if d.memory_total_mib is None else d.memory_total_mib} "
                    f"MiB, compute {d.compute_capability or '?'})" for d in g.devices)
    text = ", ".join(f"{n} x {k}" for k, n in kinds.items())
    text += f"; driver {g.driver or '?'}"
    if g.cuda_driver:
        text += f" (CUDA {g.cuda_driver})"
    return text + f", read with {g.source}"


def _paddle(facts: HostFacts) -> str:
    p = facts.paddle
    if not isinstance(p, PaddleFacts):
        return "not requested (--no-paddle)" if not_requested(p) else _err(p)
    if not p.available:
        return f"not importable with {p.interpreter} (see below)"
    build = (f"CUDA {p.cuda}, cuDNN {p.cudnn or '?'}, NCCL {p.nccl or '?'}"
             if p.compiled_with_cuda else "CPU build")
    return f"{p.version or '?'} with {p.interpreter} (Python {p.python or '?'}), {build}"


def _network(facts: HostFacts, address: str) -> str:
    net = facts.network
    if not isinstance(net, NetworkFacts):
        return _err(net)
    i = net.job_interface(address)
    if i is None:
        return "no interface with an address and no default route"
    addrs = [a for a in i.addresses if not a.startswith("fe80:")]
    speed = f", {i.speed_mbps} Mbit/s" if i.speed_mbps else ""
    return f"{i.name} {' '.join(addrs[:2]) or 'no address'}, MTU {i.mtu}{speed}"


def facts_lines(name: str, host: HostEntry) -> list[str]:
    """The machine in six lines; a host that could not be probed in one, with why."""
    if not host.ok or host.facts is None:
        failure = host.failure or FailureEntry()
        return [f"THIS MACHINE {name}: could not be probed ({failure.stage or '?'}: "
                f"{failure.reason or '?'})"]
    facts = host.facts
    return [f"THIS MACHINE {_system(facts, name)}",
            f"  CPU      {_cpu(facts)}",
            f"  memory   {_memory(facts)}",
            f"  GPUs     {_gpus(facts)}",
            f"  Paddle   {_paddle(facts)}",
            f"  network  {_network(facts, host.address or '')}"]
