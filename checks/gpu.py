"""GPUs are alike across hosts and within each host: model, count, memory, CC, driver."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, hosts_text, passed, sections

from preflight.facts import GpuFacts
from preflight.model import Cluster, Finding, Status

NAME = "gpu-homogeneous"


def _one(values: set[object]) -> object:
    return next(iter(values)) if len(values) == 1 else "mixed"


def check(cluster: Cluster) -> Iterator[Finding]:
    gpus, missing = sections(cluster, lambda f: f.gpu, GpuFacts)
    yield from could_not_check(NAME, "GPU facts", missing)
    if not gpus:
        return
    if all(not g.devices for g in gpus.values()):
        yield passed(NAME, gpus, f"no GPUs on any of {len(gpus)} hosts (a CPU cluster)")
        return
    bad: list[Finding] = []
    # Within one host: a job assumes every local rank is the same device.
    for host, g in gpus.items():
        for label, vals in (("model", {d.name for d in g.devices}),
                            ("memory", {d.memory_total_mib for d in g.devices}),
                            ("compute capability", {d.compute_capability for d in g.devices})):
            if len(vals) > 1:
                bad.append(Finding(NAME, Status.FAIL, (host,),
                                   f"{host}: GPUs of one host differ in {label}: "
                                   f"{', '.join(sorted(map(str, vals)))}",
                                   {"field": label, "values": sorted(map(str, vals))}))
    bad += compare(NAME, "GPU count", {h: len(g.devices) for h, g in gpus.items()})
    with_gpus = {h: g for h, g in gpus.items() if g.devices}
    for label, pick in (
        ("GPU model", lambda g: _one({d.name for d in g.devices})),
        ("GPU memory (MiB)", lambda g: _one({d.memory_total_mib for d in g.devices})),
        ("compute capability", lambda g: _one({d.compute_capability for d in g.devices})),
        ("driver", lambda g: g.driver),
    ):
        bad += compare(NAME, label, {h: pick(g) for h, g in with_gpus.items()})
    yield from bad
    if not bad:
        g = next(iter(with_gpus.values()))
        d = g.devices[0]
        yield passed(NAME, gpus, f"{len(g.devices)} x {d.name}, {d.memory_total_mib} MiB, "
                     f"cc {d.compute_capability}, driver {g.driver} on all "
                     f"{len(gpus)} hosts ({hosts_text(list(gpus))})")
