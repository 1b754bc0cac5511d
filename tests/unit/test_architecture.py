"""The shape the design relies on: checks are pure, the probe is self-contained, imports are
namespaced."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROBE = ROOT / "preflight" / "probe_script.py"


def imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


# A check judges facts; it must not be able to open a connection, a process or a file.
FORBIDDEN_IN_CHECKS = ("preflight.ssh", "preflight.collect", "preflight.remote",
                       "preflight.netbench", "preflight.iperfrun", "preflight.allreduce",
                       "fabric", "paramiko", "invoke", "socket", "subprocess", "os", "shutil",
                       "pathlib")


@pytest.mark.parametrize("path", sorted((ROOT / "checks").glob("*.py")), ids=lambda p: p.name)
def test_checks_do_no_io(path):
    bad = {m for m in imports(path) for f in FORBIDDEN_IN_CHECKS
           if m == f or m.startswith(f + ".")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_registry_is_an_explicit_tuple_of_every_check_module():
    from preflight.checks import ALL_CHECKS
    assert isinstance(ALL_CHECKS, tuple)
    names = [c.name for c in ALL_CHECKS]
    assert len(names) == len(set(names))
    # Every module that defines a check function (helpers and data tables define none).
    modules = {p.stem for p in (ROOT / "checks").glob("*.py")
               if "\ndef check" in p.read_text()}
    registered = {c.run.__module__.rsplit(".", 1)[-1] for c in ALL_CHECKS}
    assert registered == modules  # a check module nobody registered is dead code


OURS = sorted(p for d in ("preflight", "checks", "inventory", "tests")
              for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_bare_checks_or_inventory_imports(path):
    bare = {m for m in imports(path) if m.split(".")[0] in ("checks", "inventory")}
    assert not bare, f"{path}: import preflight.{sorted(bare)[0]} instead"


def test_probe_is_stdlib_only_and_python36_syntax():
    ast.parse(PROBE.read_text(), feature_version=(3, 6))
    stdlib = set(sys.stdlib_module_names)
    optional = {"pynvml"}  # imported inside try/except, used only where the host has it
    top = {m.split(".")[0] for m in imports(PROBE)} - optional
    assert top <= stdlib, f"probe imports non-stdlib {sorted(top - stdlib)}"


def test_allreduce_script_is_stdlib_and_paddle_only_and_python36_syntax():
    script = ROOT / "preflight" / "allreduce_script.py"
    ast.parse(script.read_text(), feature_version=(3, 6))
    top = {m.split(".")[0] for m in imports(script)} - {"paddle"}
    assert top <= set(sys.stdlib_module_names)


def test_probe_embedded_sources_are_python36_syntax():
    ns: dict[str, object] = {}
    src = PROBE.read_text()
    exec(compile(ast.parse(src), str(PROBE), "exec"), ns)  # defines, runs nothing (no __main__)
    for name in ("PADDLE_CHILD", "NVML_SRC"):
        ast.parse(str(ns[name]), feature_version=(3, 6))
