"""The remote command: inventory values are quoted so only the intended command runs."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import pytest
from support import HOSTILE

from preflight.collect import CollectOptions, probe_args, remote_command
from preflight.model import Host


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_interpreter_paths_never_run(tmp_path, value):
    marker = tmp_path / "marker"
    hostile = value.format(m=marker)
    echo = tmp_path / "echo-args"
    echo.write_text("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n")
    echo.chmod(0o755)
    probe = tmp_path / "probe file with spaces.py"
    probe.write_text("")
    host = Host(name="n", address="10.0.0.1", python=hostile, probe_python=str(echo))
    cmd = remote_command(str(probe), host, CollectOptions(), budget=5)
    # The login shell runs the command string: do exactly that here.
    out = subprocess.run(["/bin/bash", "-c", cmd], capture_output=True, text=True, timeout=10)
    assert not marker.exists()
    args = out.stdout.splitlines()
    assert args[args.index("--python") + 1] == hostile  # arrived as one literal argument
    assert not probe.exists()  # and the probe file is removed after the run


def test_remote_command_bounds_the_probe_on_the_host():
    host = Host(name="n", address="10.0.0.1")
    cmd = remote_command("/tmp/.preflight-probe-x.py", host, CollectOptions(), budget=42)
    assert "timeout -k 2 43" in cmd and "rm -f" in cmd
    assert cmd.startswith("sh -c ")


def test_no_paddle_skips_the_import_and_says_so(tmp_path):
    # The probe, run as the hosts run it, with a training python that would record its start.
    marker = tmp_path / "paddle-started"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    python.chmod(0o755)
    host = Host(name="n", address="10.0.0.1", python=str(python), probe_python=sys.executable)
    args = probe_args(host, CollectOptions(paddle=False, cpu_sample_s=0.05), budget=20)
    out = subprocess.run([sys.executable, str(probe_path()), *args], capture_output=True,
                         text=True, timeout=30, check=True)
    doc = json.loads(out.stdout)
    assert doc["paddle"] == {"error": "not collected (preflight ran with --no-paddle)"}
    assert not marker.exists() and doc["cpu"]["logical"] >= 1


def probe_path():
    return resources.files("preflight").joinpath("probe_script.py")
