"""Real GPU machines' captures (tests/fixtures/capture_gpu.py): the probe's NVML section and
its nvidia-smi section parse, and read the same GPUs alike (tests/fixtures/gpu: an NVIDIA
H200; docs/gpu.md)."""

from __future__ import annotations

import json
import pathlib

import pytest
from facttools import gpu_sources_agree
from support import cluster

from preflight.checks import gpu_homogeneous
from preflight.model.findings import Status

CAPTURES = sorted((pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "gpu")
                  .glob("*.json"))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_a_real_gpu_reads_alike_through_nvml_and_nvidia_smi(path):
    nvml, smi = gpu_sources_agree(json.loads(path.read_text()))
    c = cluster(a={"gpu": nvml}, b={"gpu": smi})
    assert [f.message for f in gpu_homogeneous.check(c) if f.status is not Status.PASS] == []
