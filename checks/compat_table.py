"""Compatibility data: which NVIDIA driver a CUDA build needs. Data only, with its sources.

Sources:
- Minor-version compatibility floors per CUDA major: NVIDIA "CUDA Compatibility -> Minor
  Version Compatibility" (docs.nvidia.com/deploy/cuda-compatibility/). Below it, a CUDA
  build of that major does not run at all.
- Driver packaged with each toolkit release (the full-feature floor): NVIDIA "CUDA Toolkit
  13.2 Update 2 Release Notes", Table 3. Between the two floors a build runs through
  minor-version compatibility, with a limited feature set (PTX JIT of newer PTX fails with
  cudaErrorUnsupportedPtxVersion).
- CUDA before 11 has no minor-version compatibility: its packaged driver is the floor.
"""

from __future__ import annotations

# CUDA major -> minimum driver for any CUDA build of that major (MVC).
MVC_FLOOR: dict[int, str] = {
    11: "450.80.02",
    12: "525.60.13",
    13: "580.65.06",
}

# CUDA "major.minor" -> driver packaged with its GA release (full-feature floor, Linux x86_64).
TOOLKIT_DRIVER: dict[str, str] = {
    "10.0": "410.48", "10.1": "418.39", "10.2": "440.33",
    "11.0": "450.36.06", "11.1": "455.23", "11.2": "460.27.03", "11.3": "465.19.01",
    "11.4": "470.42.01", "11.5": "495.29.05", "11.6": "510.39.01", "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03", "12.3": "545.23.06",
    "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03", "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06", "13.1": "590.44.01", "13.2": "595.45.04",
}


# GPU architectures of Paddle wheels that do not report cuda_archs() (2.6 has no such call),
# by (Paddle minor version, CUDA minor version): (sm codes, whether PTX is included). The
# PyPI paddlepaddle-gpu 2.6.x wheels are built for CUDA 11.8 with cubins for sm_61/70/75/80/86
# and no PTX: on Hopper (sm_90) and later every kernel fails ("no kernel image is available").
# Source: the architectures in the PyPI paddlepaddle-gpu 2.6.2 cp311 wheel's libpaddle.so.
WHEEL_ARCHS: dict[tuple[str, str], tuple[tuple[int, ...], bool]] = {
    ("2.6", "11.8"): ((61, 70, 75, 80, 86), False),
}
