"""The gpu-homogeneous check: GPU model, count, memory, CC, driver and settings alike."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import cluster, devices, gpu, messages, same

from preflight.checks import gpu_homogeneous
from preflight.model import facts as F
from preflight.model.facts import SectionError
from preflight.model.findings import Status

GPU_CASES = [
    ("alike", same(4, gpu=gpu()), [], None),
    ("cpu-cluster", same(3, gpu=gpu(n=0)), [], None),
    ("driver", {**same(5, gpu=gpu()), "node07": {"gpu": gpu(driver="550.90.07")}},
     ["node07: driver 550.90.07 != 550.54.15 (5 of 6 hosts)"], None),
    ("count", {**same(3, gpu=gpu()), "node09": {"gpu": gpu(n=4)}},
     ["node09: GPU count 4 != 8 (3 of 4 hosts)"], None),
    ("model-memory", {**same(2, gpu=gpu()),
                      "node05": {"gpu": gpu(name="NVIDIA A100-SXM4-80GB", mem=81920, cc="8.0")}},
     ["node05: GPU model NVIDIA A100-SXM4-80GB != NVIDIA H100 80GB HBM3 (2 of 3 hosts)",
      "node05: GPU memory (MiB) 81920 != 81559 (2 of 3 hosts)",
      "node05: compute capability 8.0 != 9.0 (2 of 3 hosts)"], None),
    ("no-gpu-among-gpus", {**same(2, gpu=gpu()), "node03": {"gpu": gpu(n=0)}},
     ["node03: GPU count 0 != 8 (2 of 3 hosts)"], None),
    ("tie", {"a": {"gpu": gpu()}, "b": {"gpu": gpu(driver="535.1")}},
     ["driver differs with no majority: 550.54.15 on a; 535.1 on b"], None),
    ("section-error", {**same(2), "node03": {"gpu": SectionError("NVML: driver mismatch")}},
     [], "node03: could not read GPU facts: NVML: driver mismatch"),
]


@pytest.mark.parametrize("hosts,fails,cnc", [c[1:] for c in GPU_CASES],
                         ids=[c[0] for c in GPU_CASES])
def test_gpu_homogeneity(hosts, fails, cnc):
    fs = list(gpu_homogeneous.check(cluster(**hosts)))
    assert messages(fs, Status.FAIL) == fails
    assert messages(fs, Status.COULD_NOT_CHECK) == ([cnc] if cnc else [])
    assert any(f.status is Status.PASS for f in fs) == (not fails)


def test_gpus_of_one_host_differ():
    from preflight.model import facts as F
    mixed = F.GpuFacts(source="nvml", driver="550", devices=(
        F.GpuDevice(0, "NVIDIA A100-SXM4-40GB", 40960, "8.0"),
        F.GpuDevice(1, "NVIDIA A100-SXM4-80GB", 81920, "8.0")))
    fs = list(gpu_homogeneous.check(cluster(a={"gpu": mixed}, b={"gpu": mixed})))
    assert "a: GPUs of one host differ in model: NVIDIA A100-SXM4-40GB, NVIDIA A100-SXM4-80GB" \
        in messages(fs, Status.FAIL)


SETTING_CASES = [
    ("ecc-host", {"a": {"gpu": devices(gpu(n=1), ecc_mode="enabled")},
                  "b": {"gpu": devices(gpu(n=1), ecc_mode="enabled")},
                  "c": {"gpu": devices(gpu(n=1), ecc_mode="disabled")}},
     Status.FAIL, "c: ECC mode disabled != enabled (2 of 3 hosts)"),
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
    fs = list(gpu_homogeneous.check(cluster(**hosts)))
    assert message in messages(fs, status)
