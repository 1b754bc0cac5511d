"""The probe's NVML path, run for real against a stand-in pynvml (no GPU in CI)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from support import cluster

from preflight.checks import gpu_health
from preflight.collect.parse import parse_probe_output
from preflight.model.facts import GpuFacts
from preflight.model.findings import Status

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_probe_reads_gpus_through_pynvml():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "fixtures" / "fake_pynvml"))
    out = subprocess.run([sys.executable, str(ROOT / "preflight" / "collect" / "probe_script.py"),
                          "--python", "/nonexistent", "--sample", "0.05"],
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    facts = parse_probe_output(out.stdout)
    g = facts.gpu
    assert isinstance(g, GpuFacts), g
    assert (g.source, g.driver, g.cuda_driver) == ("nvml", "550.54.15", "12.4")
    assert [d.memory_total_mib for d in g.devices] == [81559, 81559]
    d0, d1 = g.devices
    assert (d0.compute_capability, d0.ecc_mode, d0.mig_mode, d0.power_limit_w) == (
        "9.0", "1/1", "0/0", 700.0)
    assert d0.nvlink_up == 18 and d0.retired_pages_pending is None  # NotSupported -> unknown
    assert (d1.clock_event_reasons, d1.processes) == (0x41, 1)
    fs = list(gpu_health.check(cluster(n1={"gpu": g})))
    fails = [f.message for f in fs if f.status is Status.FAIL]
    assert fails == [
        "n1: GPU1 (NVIDIA H100 80GB HBM3): clocks slowed by hardware thermal slowdown",
        "n1: GPU1 (NVIDIA H100 80GB HBM3): already busy: 1 compute process(es) running"]
