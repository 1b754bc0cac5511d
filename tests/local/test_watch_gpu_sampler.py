"""The sampler's GPU part on this machine, through the stand-ins for NVML (nvidia-ml-py's
pynvml) and nvidia-smi in tests/fixtures (CI has no GPU; tests/gpu/ runs the same reading on
a real one): each GPU's figures, each rank's GPUs, the older driver's field names, a lost
GPU, and nvidia-smi left running for the sampler's life and no longer."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import procs_with_env

from preflight.hostside import sampler_gpu as G

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAKE_NVML = FIXTURES / "fake_pynvml"
FAKE_SMI = FIXTURES / "fake_nvidia_smi"


def fake_pynvml(monkeypatch: pytest.MonkeyPatch, scenario: str) -> ModuleType:
    monkeypatch.setenv("FAKE_NVML", scenario)
    spec = importlib.util.spec_from_file_location(f"pynvml_{scenario.replace('-', '_')}",
                                                  FAKE_NVML / "pynvml.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_nvml_gives_each_gpus_figures_and_its_processes(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_PIDS", "1:4242,1:4343")
    gpus = G.NvmlGpus(fake_pynvml(monkeypatch, "h100"))
    g0, g1 = gpus.sample()
    assert g0 == {"i": 0, "util": 100, "mem_util": 38, "sm": 1980, "temp": 61, "power_w": 412.3,
                  "sm_max": 1980, "reasons": 0x1, "pids": []}
    assert (g1["sm"], g1["reasons"], g1["temp"], g1["pids"]) == (1215, 0x41, 88, [4242, 4343])
    assert gpus.uuids == ["GPU-00000000-aaaa-bbbb-cccc-dddddddddddd",
                          "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"]


def test_nvml_of_a_driver_before_r535_reads_the_throttle_reasons_by_their_old_name(monkeypatch):
    (_, g1) = G.NvmlGpus(fake_pynvml(monkeypatch, "old-driver")).sample()
    assert g1["reasons"] == 0x41


def test_a_lost_gpu_is_said_on_it_and_the_others_are_read(monkeypatch):
    g0, g1 = G.NvmlGpus(fake_pynvml(monkeypatch, "lost-gpu")).sample()
    assert g0["sm"] == 1980
    assert g1 == {"i": 1, "error": "NVMLError_GpuIsLost: GPU is lost"}


@pytest.mark.parametrize("who,expect", [
    ({"FLAGS_selected_gpus": "3"}, [3]),
    ({"FLAGS_selected_gpus": "1", "CUDA_VISIBLE_DEVICES": "4,6"}, [6]),
    ({"FLAGS_selected_gpus": "0", "CUDA_VISIBLE_DEVICES": "GPU-00000001"}, [1]),
    ({"FLAGS_selected_gpus": "0,1", "CUDA_VISIBLE_DEVICES": "2,3"}, [2, 3]),
    ({"FLAGS_selected_gpus": "2", "CUDA_VISIBLE_DEVICES": "0,1"}, None),  # out of range
    ({"FLAGS_selected_gpus": "0", "CUDA_VISIBLE_DEVICES": "GPU-0000000"}, None),  # ambiguous
    ({"CUDA_VISIBLE_DEVICES": "1"}, None),  # not a rank Paddle's launcher placed
], ids=["index", "visible-numbers", "visible-uuid", "two", "out-of-range", "ambiguous",
        "no-selection"])
def test_a_ranks_gpus_from_what_its_launcher_gave_it(who, expect):
    uuids = ["GPU-00000000-aaaa", "GPU-00000001-aaaa"]
    assert G.rank_gpus(77, who, [{"i": 0}, {"i": 1}], uuids) == expect


def test_the_gpu_nvml_lists_a_rank_on_wins_over_its_launchers_word():
    rows = [{"i": 0, "pids": []}, {"i": 1, "pids": [77]}]
    assert G.rank_gpus(77, {"FLAGS_selected_gpus": "0"}, rows, []) == [1]


def wait_rows(gpus: G.SmiGpus, n: int) -> list[dict[str, Any]]:
    end = time.monotonic() + 10
    rows: list[dict[str, Any]] = []
    while time.monotonic() < end and len(rows) < n:
        rows = gpus.sample()
        time.sleep(0.05)
    return rows


@pytest.mark.parametrize("scenario", ["h100", "old-driver"])
def test_nvidia_smi_is_left_running_and_its_rows_read(monkeypatch, scenario):
    monkeypatch.setenv("FAKE_NVML", scenario)
    tag = f"left-running-{scenario}-{os.getpid()}"
    monkeypatch.setenv("SMI_TAG", tag)  # its nvidia-smi, not one of a test beside it

    def smi_procs() -> list[int]:
        return procs_with_env("SMI_TAG", tag)

    gpus = G.SmiGpus(str(FAKE_SMI / "nvidia-smi"), 0.2)
    try:
        assert gpus.fields[6] == ("clocks_event_reasons.active" if scenario == "h100" else
                                  "clocks_throttle_reasons.active")
        rows = wait_rows(gpus, 2)
        assert rows[1] == {"i": 1, "util": 100, "mem_util": 38, "sm": 1215, "sm_max": 1980,
                           "reasons": 0x41, "temp": 88, "power_w": 412.3}
        seen = gpus.seen[1]
        time.sleep(0.6)
        assert gpus.seen[1] > seen  # the same process keeps printing
        assert len(smi_procs()) == 1
    finally:
        gpus.close()
    end = time.monotonic() + 10
    while smi_procs() and time.monotonic() < end:
        time.sleep(0.05)
    assert smi_procs() == []


def test_smi_values_it_cannot_give_are_left_out():
    fields = list(G.SMI_FIELDS)
    row = G.smi_row(fields, "0, GPU-1, [N/A], 12, 1410, 1410, [Not Supported], 40, [N/A]")
    assert row == {"i": 0, "mem_util": 12, "sm": 1410, "sm_max": 1410, "temp": 40}
    assert G.smi_row(fields, "WARNING: infoROM is corrupted at gpu 0000:3B:00.0") is None
