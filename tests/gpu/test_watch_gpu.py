"""The watch sampler's GPU part on this machine's real GPUs: NVML (where nvidia-ml-py is
installed) and nvidia-smi left running read the same GPUs alike, and a process computing on
a GPU is seen on it, busy. Skipped cleanly without an NVIDIA GPU; CI has none.

PREFLIGHT_GPU_PYTHON names an interpreter with PyTorch to start the computing process
(default: python3); without PyTorch that part is skipped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any

import pytest
from conftest import NO_GPU

from preflight.hostside import sampler_gpu as G

pytestmark = pytest.mark.gpu

PYTHON = os.environ.get("PREFLIGHT_GPU_PYTHON", "python3")
BURN = ("import torch, time\n"
        "a = torch.randn(8192, 8192, device='cuda')\n"
        "end = time.time() + 60\n"
        "while time.time() < end:\n"
        "    a = (a @ a).clamp_(-1, 1)\n"
        "    torch.cuda.synchronize()\n")


def smi() -> str:
    path = shutil.which("nvidia-smi")
    if path is None or not G.has_driver():
        pytest.skip(NO_GPU)
    return path


def nvml() -> G.NvmlGpus:
    try:
        return G.NvmlGpus(G.import_pynvml())
    except ImportError:
        pytest.skip("nvidia-ml-py is not installed")


def sane(g: dict[str, Any]) -> None:
    assert 0 <= g["util"] <= 100 and 0 <= g["mem_util"] <= 100, g
    assert 0 < g["sm"] and 0 < g["sm_max"], g
    assert g["sm"] <= g["sm_max"] * 1.05, g  # boost may read a step above the table
    assert 0 < g["temp"] < 110 and g["power_w"] > 0, g
    assert isinstance(g["reasons"], int), g


def test_nvml_and_nvidia_smi_read_the_same_gpus_alike():
    path = smi()
    by_nvml = nvml()
    rows = by_nvml.sample()
    print("nvml:", json.dumps(rows))
    for g in rows:
        sane(g)
    loop = G.SmiGpus(path, 0.5)
    try:
        end = time.monotonic() + 30
        got: list[dict[str, Any]] = []
        while time.monotonic() < end and len(got) < len(rows):
            got = loop.sample()
            time.sleep(0.1)
        print("nvidia-smi:", loop.fields, json.dumps(got))
        assert [g["i"] for g in got] == [g["i"] for g in rows]
        for a, b in zip(rows, got):
            sane(b)
            assert a["sm_max"] == b["sm_max"]
        assert loop.uuids == by_nvml.uuids
    finally:
        loop.close()


def test_a_process_computing_on_a_gpu_is_seen_on_it_and_busy():
    smi()
    gpus = nvml()
    probe = subprocess.run([PYTHON, "-c", "import torch; assert torch.cuda.is_available()"],
                           capture_output=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"{PYTHON} has no PyTorch with CUDA")
    p = subprocess.Popen([PYTHON, "-c", BURN], env=dict(os.environ, CUDA_VISIBLE_DEVICES="0"))
    try:
        end = time.monotonic() + 60
        row: dict[str, Any] = {}
        while time.monotonic() < end:
            row = gpus.sample()[0]
            if p.pid in row.get("pids", ()) and row.get("util", 0) >= 50:
                break
            time.sleep(0.5)
        print("GPU 0 computing:", json.dumps(row))
        assert p.pid in row["pids"] and row["util"] >= 50, row
        assert G.rank_gpus(p.pid, {}, gpus.sample(), gpus.uuids) == [0]
    finally:
        p.kill()
        p.wait(30)
