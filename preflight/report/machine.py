"""One machine's facts in a few lines: what the local audit shows first (CPU, memory, GPUs
with model and driver, Paddle with CUDA/cuDNN/NCCL, the network), before its findings.

It reads a host of the JSON report, as every renderer does. A section the probe could not
read says so in its line ("error: ..."); Paddle that is not importable says "not importable"
and leaves the reason to the finding below, so the reason is not printed twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Optional

from preflight.common.summary import as_list, job_interface
from preflight.model.facts import PADDLE_NOT_REQUESTED

_GIB = 1 << 30


def _sec(facts: Mapping[str, Any], name: str) -> tuple[Mapping[str, Any], Optional[str]]:
    """Returns (the section, None) or ({}, why it is missing)."""
    v = facts.get(name)
    if not isinstance(v, dict):
        return {}, "not reported"
    if set(v) == {"error"}:
        return {}, f"error: {v['error']}"
    return v, None


def _gib(n: Any) -> str:
    return f"{n / _GIB:.1f} GiB" if isinstance(n, (int, float)) else "?"


def _system(facts: Mapping[str, Any], name: str) -> str:
    s, err = _sec(facts, "system")
    if err:
        return f"{name} ({err})"
    return (f"{s.get('hostname') or name} ({s.get('os', '?')}, kernel {s.get('kernel', '?')}, "
            f"{s.get('arch', '?')})")


def _cpu(facts: Mapping[str, Any]) -> str:
    c, err = _sec(facts, "cpu")
    if err:
        return err
    text = f"{c.get('model') or '?'}: {c.get('logical', '?')} logical cores"
    if c.get("effective") not in (None, c.get("logical")):
        text += f", {c.get('effective')} effective (CPU quota or affinity)"
    other = c.get("other_work")
    busy = other.get("busy_cores") if isinstance(other, dict) else None
    if isinstance(busy, (int, float)):
        text += f", {busy:.1f} busy with other work"
    return text


def _memory(facts: Mapping[str, Any]) -> str:
    m, err = _sec(facts, "memory")
    parts = [err or f"{_gib(m.get('total_bytes'))}, {_gib(m.get('available_bytes'))} available"]
    shm, err = _sec(facts, "shm")
    parts.append(f"/dev/shm {err or _gib(shm.get('size_bytes'))}")
    tmp, err = _sec(facts, "tmp")
    if not err:
        parts.append(f"{tmp.get('path', 'temp')} {_gib(tmp.get('free_bytes'))} free")
    return "; ".join(parts)


def _gpus(facts: Mapping[str, Any]) -> str:
    g, err = _sec(facts, "gpu")
    if err:
        return err
    devs = [d for d in as_list(g.get("devices")) if isinstance(d, dict)]
    if not devs:
        return "none" + (" (no NVIDIA driver answered)" if g.get("source") == "none" else "")
    kinds = Counter(f"{d.get('name', '?')} ({d.get('memory_total_mib', '?')} MiB, compute "
                    f"{d.get('compute_capability', '?')})" for d in devs)
    text = ", ".join(f"{n} x {k}" for k, n in kinds.items())
    text += f"; driver {g.get('driver') or '?'}"
    if g.get("cuda_driver"):
        text += f" (CUDA {g['cuda_driver']})"
    return text + f", read with {g.get('source')}"


def _paddle(facts: Mapping[str, Any]) -> str:
    p, err = _sec(facts, "paddle")
    if err:
        return "not requested (--no-paddle)" if PADDLE_NOT_REQUESTED in err else err
    if not p.get("available"):
        return f"not importable with {p.get('interpreter', '?')} (see below)"
    build = (f"CUDA {p.get('cuda')}, cuDNN {p.get('cudnn') or '?'}, NCCL {p.get('nccl') or '?'}"
             if p.get("compiled_with_cuda") else "CPU build")
    return (f"{p.get('version', '?')} with {p.get('interpreter', '?')} (Python "
            f"{p.get('python', '?')}), {build}")


def _network(facts: Mapping[str, Any], address: str) -> str:
    _, err = _sec(facts, "network")
    if err:
        return err
    i = job_interface(facts, address)
    if i is None:
        return "no interface with an address and no default route"
    addrs = [str(a) for a in as_list(i.get("addresses")) if not str(a).startswith("fe80:")]
    speed = f", {i['speed_mbps']} Mbit/s" if i.get("speed_mbps") else ""
    return f"{i.get('name')} {' '.join(addrs[:2]) or 'no address'}, MTU {i.get('mtu')}{speed}"


def facts_lines(name: str, host: Mapping[str, Any]) -> list[str]:
    """The machine in six lines; a host that could not be probed in one, with why."""
    if host.get("status") != "ok":
        failure = host.get("failure") or {}
        return [f"THIS MACHINE {name}: could not be probed ({failure.get('stage', '?')}: "
                f"{failure.get('reason', '?')})"]
    facts = host.get("facts") or {}
    return [f"THIS MACHINE {_system(facts, name)}",
            f"  CPU      {_cpu(facts)}",
            f"  memory   {_memory(facts)}",
            f"  GPUs     {_gpus(facts)}",
            f"  Paddle   {_paddle(facts)}",
            f"  network  {_network(facts, str(host.get('address', '')))}"]
