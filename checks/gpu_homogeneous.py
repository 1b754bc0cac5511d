"""GPUs are alike across hosts and within each host: model, count, memory, CC, driver."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, passed, sections
from preflight.common.units import hosts_text
from preflight.model.cluster import Cluster
from preflight.model.facts import GpuFacts
from preflight.model.findings import Finding, Status

NAME = "gpu-homogeneous"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Every host has the same GPU model, count, memory, compute capability and driver, and the GPUs
within a host are alike. A cluster with no GPUs passes as a CPU cluster.

Settings: ECC mode, MIG mode and NVLink links up alike (fail); power limit, persistence mode,
VBIOS alike (warn); within each host and across hosts.
"""
WHY = ("A synchronous step ends when the slowest GPU ends: a smaller, older or differently set "
       "up GPU (ECC, MIG, power limit) sets the pace of every rank, and a batch sized for one "
       "memory size does not fit another.")
FIX = ("Replace or re-image the outlier; install the cluster's driver; set ECC/MIG the same "
       "everywhere (`nvidia-smi -e`, `-mig`) and reboot; reseat NVLink bridges; set the power "
       "limit")
LIMITS: tuple[str, ...] = ()


def _one(values: set[object]) -> object:
    return next(iter(values)) if len(values) == 1 else "mixed"


# Settings that should match on every GPU of the cluster: (label, attribute, status when not).
# ECC and MIG change usable memory and device layout; fewer NVLink links up means a slower
# collective; VBIOS, persistence and power limits change clocks and start-up behaviour.
SETTINGS = (
    ("ECC mode", "ecc_mode", Status.FAIL),
    ("MIG mode", "mig_mode", Status.FAIL),
    ("NVLink links up", "nvlink_up", Status.FAIL),
    ("power limit (W)", "power_limit_w", Status.WARN),
    ("persistence mode", "persistence_mode", Status.WARN),
    ("VBIOS", "vbios", Status.WARN),
)


def _settings(gpus: dict[str, GpuFacts]) -> Iterator[Finding]:
    """Findings for settings that differ within a host or between hosts (unreported: skip)."""
    per_host: dict[str, dict[str, object]] = {label: {} for label, _, _ in SETTINGS}
    for host, g in gpus.items():
        for label, attr, status in SETTINGS:
            vals = {getattr(d, attr) for d in g.devices} - {None}
            if len(vals) > 1:
                by_gpu = ", ".join(f"GPU{d.index}={getattr(d, attr)}" for d in g.devices)
                yield Finding(NAME, status, (host,),
                              f"{host}: GPUs of one host differ in {label}: {by_gpu}",
                              {"field": label})
            elif vals:
                per_host[label][host] = vals.pop()
    for label, _, status in SETTINGS:
        yield from compare(NAME, label, per_host[label], status=status)


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
    bad += list(_settings(with_gpus))
    yield from bad
    if not bad:
        g = next(iter(with_gpus.values()))
        d = g.devices[0]
        yield passed(NAME, gpus, f"{len(g.devices)} x {d.name}, {d.memory_total_mib} MiB, "
                     f"cc {d.compute_capability}, driver {g.driver} on all "
                     f"{len(gpus)} hosts ({hosts_text(list(gpus))})")
