"""GPU settings and health, stack compatibility and version pins, on facts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support import cluster, gpu, paddle, same

from preflight import facts as F
from preflight.checks import compat, gpu_health, pins
from preflight.checks import gpu as gpu_check
from preflight.model import Status
from preflight.policy import Pin, Policy


def msgs(findings, status):
    return [f.message for f in findings if f.status is status]


def devices(g: F.GpuFacts, **changes) -> F.GpuFacts:
    """g with changes applied to GPU 0 (the others stay as they are)."""
    d0 = replace(g.devices[0], **changes)
    return replace(g, devices=(d0, *g.devices[1:]))


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
    fails = msgs(fs, Status.FAIL)
    assert len(fails) == len(expect)
    for msg, text in zip(fails, expect):
        assert msg.startswith("a: GPU0 (NVIDIA H100 80GB HBM3): ") and text in msg
    assert any(f.status is Status.PASS for f in fs) == (not expect)


def test_gpu_health_unreported_is_a_warning():
    fs = list(gpu_health.check(cluster(a={"gpu": gpu()})))
    assert msgs(fs, Status.WARN) == ["a: GPU health not reported by nvml; install nvidia-ml-py "
                                     "for the probe's or the training python"]


SETTING_CASES = [
    ("ecc-host", {"a": {"gpu": devices(gpu(n=1), ecc_mode="1/1")},
                  "b": {"gpu": devices(gpu(n=1), ecc_mode="1/1")},
                  "c": {"gpu": devices(gpu(n=1), ecc_mode="0/0")}},
     Status.FAIL, "c: ECC mode 0/0 != 1/1 (2 of 3 hosts)"),
    ("nvlink-within-host", {"a": {"gpu": replace(gpu(n=2), devices=(
        F.GpuDevice(0, "H100", 81559, "9.0", nvlink_up=18),
        F.GpuDevice(1, "H100", 81559, "9.0", nvlink_up=12)))}},
     Status.FAIL, "a: GPUs of one host differ in NVLink links up: GPU0=18, GPU1=12"),
    ("power", {"a": {"gpu": devices(gpu(n=1), power_limit_w=700.0)},
               "b": {"gpu": devices(gpu(n=1), power_limit_w=700.0)},
               "c": {"gpu": devices(gpu(n=1), power_limit_w=500.0)}},
     Status.WARN, "c: power limit (W) 500.0 != 700.0 (2 of 3 hosts)"),
]


@pytest.mark.parametrize("hosts,status,message", [c[1:] for c in SETTING_CASES],
                         ids=[c[0] for c in SETTING_CASES])
def test_gpu_settings(hosts, status, message):
    fs = list(gpu_check.check(cluster(**hosts)))
    assert message in msgs(fs, status)


# ---------------------------------------------------------------- compat
COMPAT_CASES = [
    ("fits", {}, "collective", [], []),
    ("old-driver", {"gpu": gpu(driver="515.65.01")}, "collective",
     ["driver 515.65.01 is too old for Paddle's CUDA 12.4 (needs >= 525.60.13)"], []),
    ("mvc-only", {"gpu": gpu(driver="535.104.05")}, "collective", [],
     ["driver 535.104.05 runs CUDA 12.4 only through minor-version compatibility"]),
    ("arch-not-covered", {"paddle": paddle(cuda_archs=(80,))}, "collective", [],
     ["compute capability 9.0 is not covered by Paddle's cuda_archs [80]"]),
    ("arch-older-minor-ok", {"gpu": gpu(cc="8.6"), "paddle": paddle(cuda_archs=(80,))},
     "collective", [], []),
    ("archs-unreported", {"paddle": paddle(cuda_archs=None, version="2.6.2")}, "collective", [],
     ["Paddle 2.6.2 does not report cuda_archs"]),
    ("cpu-build-on-gpu", {"paddle": paddle(compiled_with_cuda=False)}, "collective",
     ["a CPU build of Paddle (3.3.1) on a host with 8 GPUs"], []),
    ("ps-without-core", {"gpu": gpu(n=0), "paddle": paddle(ps_core=False)}, "ps",
     ["lacks the parameter-server core"], []),
    ("ps-with-core", {"gpu": gpu(n=0), "paddle": paddle(ps_core=True)}, "ps", [], []),
]


@pytest.mark.parametrize("spec,mode,fails,warns", [c[1:] for c in COMPAT_CASES],
                         ids=[c[0] for c in COMPAT_CASES])
def test_stack_compat(spec, mode, fails, warns):
    c = replace(cluster(a=spec), policy=Policy(mode=mode))
    fs = list(compat.check(c))
    assert len(msgs(fs, Status.FAIL)) == len(fails)
    assert len(msgs(fs, Status.WARN)) == len(warns)
    for got, want in zip(msgs(fs, Status.FAIL) + msgs(fs, Status.WARN), fails + warns):
        assert got.startswith("a: ") and want in got
    assert any(f.status is Status.PASS for f in fs) == (not fails and not warns)


def test_driver_table_edges():
    assert list(compat.driver_findings("11.8", "520.61.05")) == []
    assert list(compat.driver_findings("12.4", "550.54.14")) == []
    assert [s for s, _ in compat.driver_findings("13.0", "575.57.08")] == [Status.FAIL]
    assert [s for s, _ in compat.driver_findings("10.2", "440.33")] == []
    assert [s for s, _ in compat.driver_findings("9.2", "396.26")] == [Status.WARN]
    assert [s for s, _ in compat.driver_findings("12.6", "garbage")] == [
        Status.COULD_NOT_CHECK]


# ---------------------------------------------------------------- pins
PIN_CASES = [
    ("paddle-ok", Pin("paddle", ">=2.6,<4"), {}, None),
    ("paddle-fails", Pin("paddle", ">=3.3"), {"paddle": paddle("3.2.2")},
     "a: paddle 3.2.2 does not satisfy paddle>=3.3"),
    ("driver", Pin("driver", ">=560"), {}, "a: driver 550.54.15 does not satisfy driver>=560"),
    ("nccl-code", Pin("nccl", ">=2.25"), {"paddle": paddle(nccl="2804")},
     "a: nccl 2.8.4 does not satisfy nccl>=2.25"),
    ("python", Pin("python", ">=3.12"), {}, "a: python 3.11.2 does not satisfy python>=3.12"),
]


@pytest.mark.parametrize("pin,spec,fail", [c[1:] for c in PIN_CASES], ids=[c[0] for c in PIN_CASES])
def test_pins(pin, spec, fail):
    fs = list(pins.check(replace(cluster(a=spec), policy=Policy(pins=(pin,)))))
    assert msgs(fs, Status.FAIL) == ([fail] if fail else [])


def test_pin_without_a_value_is_could_not_check():
    c = replace(cluster(**same(1, gpu=gpu(n=0), paddle=paddle(compiled_with_cuda=False))),
                policy=Policy(pins=(Pin("driver", ">=535"), Pin("cuda", ">=12"))))
    assert msgs(pins.check(c), Status.COULD_NOT_CHECK) == [
        "node01: no driver version to hold to driver>=535",
        "node01: no cuda version to hold to cuda>=12"]
