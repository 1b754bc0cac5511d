"""Reads the JUnit files of a test run: prints the ten slowest tests and one line for the whole
suite ("N passed, N failed, N skipped"); with --write, writes each module's seconds to
tests/durations.json, by which later runs hand the modules to their lanes longest first, and
the tests that took more than SLOW_S (each says why in its docstring: a unit test holds them
to it). scripts/test.sh writes it at the end of every whole run.

    python scripts/durations.py [--write | --add] test-results/*.xml

--add merges the files' modules into the record as it is (a new module measured alone);
--write replaces it (a whole run: modules removed since leave it)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

DURATIONS = Path(__file__).resolve().parents[1] / "tests" / "durations.json"
SLOW_S = 60.0


def module_of(classname: str) -> str:
    """tests.cluster.test_network -> tests/cluster/test_network.py (a module's node id)."""
    return classname.replace(".", "/") + ".py"


def outcome(case: ET.Element) -> str:
    for tag, word in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
        if case.find(tag) is not None:
            return word
    return "passed"


def main(args: list[str]) -> int:
    write, add = "--write" in args, "--add" in args
    paths = [a for a in args if a not in ("--write", "--add")]
    counts: Counter[str] = Counter()
    modules: dict[str, float] = defaultdict(float)
    tests: list[tuple[float, str]] = []
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            seconds = float(case.get("time") or 0.0)
            module = module_of(case.get("classname", ""))
            modules[module] += seconds
            tests.append((seconds, f"{module}::{case.get('name')}"))
            counts[outcome(case)] += 1
    print("slowest tests:")
    for seconds, name in sorted(tests, reverse=True)[:10]:
        print(f"  {seconds:7.1f} s  {name}")
    if write or add:
        slow = {name.split("[", 1)[0]: round(s, 1) for s, name in sorted(tests, reverse=True)
                if s > SLOW_S}
        if add:  # the record's figures of every module these files did not measure
            with open(DURATIONS) as fh:
                kept = json.load(fh)
            slow = {**{k: v for k, v in kept["slow_tests"].items()
                       if k.split("::", 1)[0] not in modules}, **slow}
            modules = defaultdict(float, {**kept["modules"], **modules})
        with open(DURATIONS, "w") as fh:
            json.dump({"modules": {m: round(s, 1) for m, s in sorted(
                modules.items(), key=lambda kv: -kv[1])}, "slow_tests": slow}, fh, indent=1)
            fh.write("\n")
    print(f"suite: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
