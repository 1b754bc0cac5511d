"""The gpu-health check: ECC, retirement and remapping, slowdowns, busy GPUs, PCIe."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support import cluster, devices, gpu, messages

from preflight.checks import gpu_health
from preflight.model import facts as F
from preflight.model.findings import Status

HEALTHY: dict[str, Any] = dict(ecc_uncorrected_volatile=0, retired_pages_pending=False,
               remapped_rows_pending=False, remapped_rows_failure=False,
               clock_event_reasons=0x1, processes=0, pcie_width=16, pcie_width_max=16)


def healthy(n: int = 2) -> F.GpuFacts:
    g = gpu(n=n)
    return replace(g, devices=tuple(replace(d, **HEALTHY) for d in g.devices))


HEALTH_CASES = [
    ("healthy", {}, []),
    ("ecc", {"ecc_uncorrected_volatile": 3}, ["3 uncorrectable ECC errors since boot"]),
    ("retired", {"retired_pages_pending": True}, ["retired pages pending"]),
    ("remap-failure", {"remapped_rows_failure": True, "remapped_rows_pending": True},
     ["row remapping failed"]),
    ("thermal", {"clock_event_reasons": 0x40 | 0x1}, ["hardware thermal slowdown"]),
    ("busy", {"processes": 2}, ["already busy: 2 compute process(es)"]),
    ("pcie", {"pcie_width": 8}, ["PCIe link x8 of x16"]),
]


@pytest.mark.parametrize("changes,expect", [c[1:] for c in HEALTH_CASES],
                         ids=[c[0] for c in HEALTH_CASES])
def test_gpu_health(changes, expect):
    fs = list(gpu_health.check(cluster(a={"gpu": devices(healthy(), **changes)})))
    fails = messages(fs, Status.FAIL)
    assert len(fails) == len(expect)
    for msg, text in zip(fails, expect):
        assert msg.startswith("a: GPU0 (NVIDIA H100 80GB HBM3): ") and text in msg
    assert any(f.status is Status.PASS for f in fs) == (not expect)


def test_gpu_health_unreported_is_a_warning():
    fs = list(gpu_health.check(cluster(a={"gpu": gpu()})))
    assert messages(fs, Status.WARN) == ["a: GPU health not reported by nvml; install nvidia-ml-py "
                                     "for the probe's or the training python"]


def test_mig_enabled_fails_and_pending_warns():
    g = devices(gpu(n=2), mig_mode="enabled")
    msgs = messages(gpu_health.check(cluster(a={"gpu": g})), Status.FAIL)
    assert len(msgs) == 1 and msgs[0].startswith("a: GPU0 (NVIDIA H100 80GB HBM3): MIG is "
                                                 "enabled: NCCL cannot span MIG instances")
    soon = devices(gpu(n=1), mig_mode="disabled (pending enabled)", processes=0)
    assert messages(gpu_health.check(cluster(a={"gpu": soon})), Status.WARN) == [
        "a: GPU0 (NVIDIA H100 80GB HBM3): MIG becomes enabled at the next GPU reset"]


def test_xid_events_since_boot_fail_by_code_and_an_unreadable_log_blocks_nothing():
    g = replace(gpu(n=2), xid=(("PCI:0000:3b:00", 79, "GPU has fallen off the bus."),
                               ("PCI:0000:3b:00", 13, "Graphics Exception"),
                               ("PCI:0000:3b:00", 13, "Graphics Exception")))
    g = devices(g, processes=0)
    found = list(gpu_health.check(cluster(a={"gpu": g})))
    assert messages(found, Status.FAIL) == [
        "a: Xid 79 (GPU fell off the bus) 1x since boot on PCI:0000:3b:00: drain the host, "
        "reset or replace the GPU"]
    assert messages(found, Status.WARN) == ["a: Xid 13 2x since boot on PCI:0000:3b:00"]
    hidden = replace(devices(gpu(n=1), processes=0),
                     xid_error="kernel log not readable: dmesg: read kernel buffer failed: "
                     "Operation not permitted")
    found = list(gpu_health.check(cluster(a={"gpu": hidden})))
    assert [f.status for f in found] == [Status.SKIP, Status.PASS]
    assert found[0].message.startswith("a: Xid history not checked: kernel log not readable")
