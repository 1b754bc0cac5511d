"""The wheel installs one top-level package, preflight; checks/ and inventory/ live inside it."""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The name on PyPI (`preflight` there is another project's); the command stays `preflight`.
DISTRIBUTION = "paddle-preflight"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, capture_output=True,
                   timeout=300)
    (built,) = out.glob("*.whl")
    return built


def test_wheel_has_only_the_preflight_package(wheel):
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-")
    names = zipfile.ZipFile(wheel).namelist()
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert f"Name: {DISTRIBUTION}\n" in zipfile.ZipFile(wheel).read(meta).decode()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"preflight"}
    for module in ("preflight/checks/__init__.py", "preflight/inventory/__init__.py",
                   "preflight/hostside/probe.py", "preflight/report/terminal.py",
                   "preflight/hostside/allreduce.py", "preflight/testing/testbed.py"):
        assert module in names
    dist = [n for n in names if n.endswith("top_level.txt")]
    if dist:
        assert zipfile.ZipFile(wheel).read(dist[0]).decode().split() == ["preflight"]


def test_a_fresh_install_runs_for_a_user_without_root(wheel):
    # What a login node or a laptop does: a virtual environment of its own (as pipx makes),
    # the wheel and its dependencies from the index, then the command, as a user who is not
    # root (nobody), on this machine alone.
    root = pathlib.Path(tempfile.mkdtemp(prefix="preflight-install-"))
    try:
        os.chmod(root, 0o755)
        venv = root / "venv"
        # Debian's python3 (scripts/setup.sh installs it): one every user may run, where the
        # tests' own interpreter may live under /root.
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                              "--disable-pip-version-check", str(wheel)],
                             capture_output=True, text=True, timeout=600)
        assert pip.returncode == 0, pip.stdout + pip.stderr
        exe = str(venv / "bin" / "preflight")
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        as_user = [runuser, "-u", "nobody", "--"] if os.geteuid() == 0 else []
        env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "LANG": "C.UTF-8"}
        version = subprocess.run([*as_user, exe, "--version"], capture_output=True, text=True,
                                 timeout=60, env=env, cwd=root)
        assert version.returncode == 0 and version.stdout.startswith("preflight "), version
        check = subprocess.run([*as_user, exe, "check", "--no-paddle", "--no-log",
                                "--json", "-"], capture_output=True, text=True, timeout=120,
                               env=env, cwd=root)
        assert "Traceback" not in check.stderr, check.stderr
        assert check.returncode in (0, 1), check.stderr
        # The report on stdout, the terminal view on stderr: this machine, checked.
        assert '"local": true' in check.stdout and "GO" in check.stderr, check.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_package_parses_on_the_oldest_python_it_claims():
    # requires-python says 3.9: no syntax of a later Python may land (match, except*, ...).
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.9"' in text
    for folder in ("preflight", "checks", "inventory"):
        for path in (ROOT / folder).rglob("*.py"):
            ast.parse(path.read_text(), str(path), feature_version=(3, 9))
