"""In CI (CI set) a test that skips fails, except a GPU test: tests/conftest.py, run for real on
a module that skips both ways."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

PROBE = '''\
import pytest

def test_needs_something_missing():
    pytest.skip("namespaces unavailable here")

@pytest.mark.gpu
def test_needs_a_gpu():
    pytest.skip("no NVIDIA GPU on this machine")

def test_runs():
    pass
'''


def run_probe(ci: bool) -> subprocess.CompletedProcess[str]:
    # Beside the other tests, so that their conftest applies; removed at once.
    path = Path(__file__).with_name(f"test_probe_{uuid.uuid4().hex[:8]}.py")
    path.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    env["PYTHONSAFEPATH"] = "1"  # the installed preflight, never the source folder
    if ci:
        env["CI"] = "1"
    try:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                               "-p", "no:xdist", "-q", str(path)], capture_output=True,
                              text=True, timeout=120, env=env,
                              cwd=Path(__file__).resolve().parents[2])
    finally:
        path.unlink()


def test_a_skip_fails_in_ci_and_a_gpu_test_may_skip():
    ci = run_probe(ci=True)
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert "skipped in CI, where only the GPU tests may skip: namespaces unavailable here" \
        in ci.stdout, ci.stdout
    assert "1 failed, 1 passed, 1 skipped" in ci.stdout, ci.stdout
    here = run_probe(ci=False)  # a developer's machine: both skip
    assert here.returncode == 0 and "1 passed, 2 skipped" in here.stdout, here.stdout
