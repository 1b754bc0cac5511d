"""One vocabulary for GPU modes and the NVSwitch fabric, whichever source read them."""

from __future__ import annotations

import pytest

from preflight.collect.parse import Malformed, gpu
from preflight.common.gpumode import fabric, mode

HEALTHY = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8


@pytest.mark.parametrize("nvml, smi, word", [
    ([1, 1], "Enabled", "enabled"), ([0, 0], "Disabled", "disabled"),
    (1, "Enabled", "enabled"), (None, "[N/A]", None)])
def test_nvml_and_nvidia_smi_spellings_become_one_word(nvml, smi, word):
    assert mode(nvml) == mode(smi) == word


def test_a_mode_change_waiting_for_a_reset_is_said():
    assert mode([0, 1]) == "disabled (pending enabled)"


@pytest.mark.parametrize("raw, expected", [
    ((0, 0, 0), (None, ())),  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: no fabric
    ((3, 0, HEALTHY), ("completed", ())),
    ((3, 0, 0), ("completed", ())),  # the plain call: no health mask at all
    ((1, 0, 0), ("not started", ())),
    ((2, 0, 0), ("in progress", ())),
    ((3, 999, HEALTHY), ("completed", ("registration failed: unknown error (999)",))),
    ((3, 0, HEALTHY & ~0xF00 | 5 << 8),
     ("completed", ("incorrect configuration: insufficient NVLinks",))),
    ((3, 0, 2 | 1 << 2 | 2 << 4 | 1 << 6),
     ("completed", ("route recovery in progress", "access timeout recovery in progress"))),
])
def test_the_fabric_state_and_health_mask_read_as_words(raw, expected):
    assert fabric(*raw) == expected


def test_a_fabric_value_of_the_wrong_shape_is_malformed():
    device = {"index": 0, "name": "H100", "fabric": [3, "0"]}
    with pytest.raises(Malformed, match="fabric: expected"):
        gpu({"source": "nvml", "devices": [device]})
    device["fabric"] = [3, 0, HEALTHY]
    assert gpu({"source": "nvml", "devices": [device]}).devices[0].fabric_state == "completed"
