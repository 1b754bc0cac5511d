"""The durations record the lanes are balanced by (tests/durations.json, which every whole run
of scripts/test.sh writes anew): it covers every test module, and each test it records over a
minute says in its docstring why it takes that long ("Its time: ...")."""

from __future__ import annotations

import ast
import json
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
RECORD = TESTS / "durations.json"
WHY = "Its time:"


def _record() -> dict[str, dict[str, float]]:
    with open(RECORD) as fh:
        doc: dict[str, dict[str, float]] = json.load(fh)
    assert set(doc) == {"modules", "slow_tests"}, sorted(doc)
    return doc


def _tests_of(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_test_module_is_in_the_record():
    modules = {f"tests/{p.relative_to(TESTS).as_posix()}" for p in TESTS.rglob("test_*.py")
               if _tests_of(p)}
    missing = sorted(modules - set(_record()["modules"]))
    assert missing == [], \
        f"not measured yet (a whole run of scripts/test.sh writes them; one module alone: " \
        f"pytest --junitxml=x.xml MODULE, then scripts/durations.py --add x.xml): {missing}"


def test_each_test_over_a_minute_says_why_in_its_docstring():
    slow = _record()["slow_tests"]
    unsaid = []
    for name in slow:
        module, _, func = name.partition("::")
        path = TESTS.parent / module
        if not path.exists():
            unsaid.append(f"{name}: no such module")
            continue
        found = _tests_of(path).get(func)
        doc = ast.get_docstring(found) if found is not None else None
        if not doc or WHY not in doc:
            unsaid.append(f"{name} ({slow[name]:.0f} s)")
    assert unsaid == [], f"say why each takes over a minute ({WHY!r} in its docstring): {unsaid}"
