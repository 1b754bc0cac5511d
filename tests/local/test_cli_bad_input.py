"""The real CLI on bad input files: one line naming the file, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CLI_CASES = [
    ("inv.yaml", "hosts: [1, 2"),  # broken YAML
    ("inv.yaml", "hosts:\n  a: {address: '10.0.0.1', port: 'x'}\n"),
    ("inv.yaml", "hosts:\n  'a;rm': {address: 10.0.0.1}\n"),
    ("inv.yaml", "hosts:\n  a: {address: '-oProxyCommand=touch /tmp/x'}\n"),
    ("inv.yaml", "hosts:\n  a: {address: 10.0.0.1, user: '-oProxyCommand=x'}\n"),
    ("inv.yaml", "\x00\x01binary"),
    ("policy.yaml", "limits: {shm_fail_mib: -1}\n"),
    ("policy.yaml", "require: ['paddle>>>2']\n"),
    ("policy.yaml", "mode: both\n"),
]


@pytest.mark.parametrize("name, text", CLI_CASES)
def test_the_cli_says_one_line_and_exits_2(tmp_path, name, text):
    (tmp_path / "inv.yaml").write_text("hosts:\n  a: {address: 10.0.0.1}\n")
    (tmp_path / name).write_text(text)
    args = ["check", "-i", "inv.yaml"] + (["--policy", "policy.yaml"]
                                          if name == "policy.yaml" else [])
    p = subprocess.run([sys.executable, "-m", "preflight", *args], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=dict(os.environ,
                                                                      PYTHONSAFEPATH="1"))
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"preflight: error: {name}"), p.stderr
