"""The wheel installs one top-level package, preflight; checks/ and inventory/ live inside it."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_wheel_has_only_the_preflight_package(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True,
                   timeout=300)
    (wheel,) = tmp_path.glob("preflight-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"preflight"}
    for module in ("preflight/checks/__init__.py", "preflight/inventory/__init__.py",
                   "preflight/collect/probe/main.py", "preflight/report/terminal.py",
                   "preflight/network/allreduce_script.py", "preflight/testing/testbed.py"):
        assert module in names
    dist = [n for n in names if n.endswith("top_level.txt")]
    if dist:
        assert zipfile.ZipFile(wheel).read(dist[0]).decode().split() == ["preflight"]
