"""The probe as shipped: its parts (collect/probe/) joined into one self-contained text. The
parts stay plain modules, linted and importable by the tests; on a host they are one
program that runs from memory."""

from __future__ import annotations

import functools
from importlib import resources

JOINED = "# joined"  # ends the lines of a part that only the package form needs


def part(name: str) -> str:
    """The source of one part (probe/<name>.py), as the package holds it."""
    return resources.files("preflight.collect.probe").joinpath(f"{name}.py").read_text()


def without_joined_lines(source: str) -> str:
    return "".join(line for line in source.splitlines(keepends=True)
                   if not line.rstrip().endswith(JOINED))


# The sources main passes on: NVML's (to the Paddle child) and the child's own.
NVML_SRC = part("nvml")
PADDLE_CHILD = part("paddle_child")
MAIN_GUARD = 'if __name__ == "__main__":'


@functools.lru_cache(maxsize=1)
def shipped() -> str:
    """The one text: main without its "# joined" imports, then, before main's entry point,
    the sources it passes on (NVML's, to the Paddle child; the child's own), nvml's
    functions, the container part's and the cgroup part's."""
    body, guard, entry = without_joined_lines(part("main")).rpartition(MAIN_GUARD)
    if not guard:
        raise RuntimeError(f"probe/main.py lost its {MAIN_GUARD!r} line")
    return (f"{body}NVML_SRC = {NVML_SRC!r}\nPADDLE_CHILD = {PADDLE_CHILD!r}\n\n\n{NVML_SRC}\n\n"
            f"{without_joined_lines(part('container'))}\n\n{part('cgroup')}\n\n{guard}{entry}")

