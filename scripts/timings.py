"""Adds up the time ledgers of a test run (test-results/timings-*.json, which the tests write
with PREFLIGHT_TIMINGS set: tests/timeledger.py) and prints where each module's time went, as
a Markdown table: its wall seconds by what was running, slowest module first, then the CPU
seconds its processes used by the same heads.

    python scripts/timings.py [--min S] test-results/timings-*.json"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

# The columns, in the order a reader follows a cluster test: the rig, then what runs on it.
HEADS = ("rig up", "sshd start", "rig down", "probe", "paddle import", "iperf3", "all-reduce",
         "ps round", "job", "podman", "slurm", "watch", "preflight", "test's own")


def add_up(paths: list[str]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Each module's wall and CPU seconds by head."""
    wall: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    cpu: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in paths:
        with open(path) as fh:
            doc = json.load(fh)
        for test, parts in doc.items():
            module = test.split("::", 1)[0]
            for head, s in parts.get("wall", {}).items():
                wall[module][head] += s
            for head, s in parts.get("cpu", {}).items():
                cpu[module][head] += s
    return wall, cpu


def table(seconds: dict[str, dict[str, float]], least: float) -> list[str]:
    heads = [h for h in HEADS if any(m.get(h, 0) >= 0.5 for m in seconds.values())]
    rows = ["| module | all | " + " | ".join(heads) + " |",
            "|---|--:|" + "--:|" * len(heads)]
    for module, by in sorted(seconds.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(by.values())
        if total < least:
            continue
        name = module.removeprefix("tests/")
        rows.append(f"| {name} | {total:.0f} | " + " | ".join(
            f"{by[h]:.0f}" if by.get(h, 0) >= 0.5 else "" for h in heads) + " |")
    return rows


def main(args: list[str]) -> int:
    least = 10.0
    if args[:1] == ["--min"]:
        least, args = float(args[1]), args[2:]
    wall, cpu = add_up(args)
    print(f"Wall seconds by what was running (modules of {least:.0f} s or more):\n")
    print("\n".join(table(wall, least)))
    print("\nCPU seconds used by the module's processes, by the same heads:\n")
    print("\n".join(table(cpu, least)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
