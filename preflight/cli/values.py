"""The types of the command line's values: each parses one flag's text, or raises argparse's
ArgumentTypeError with a one-line reason (exit 2, the flag named)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable


def positive(kind: type[float] | type[int], zero: bool = False,
             ) -> Callable[[str], float | int]:
    """A parser of numbers above 0 (zero: 0 or more)."""
    def parse(text: str) -> float | int:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if v < 0 or (v == 0 and not zero):
            raise argparse.ArgumentTypeError(
                f"must be {'0 or more' if zero else 'greater than 0'}, got {text}")
        return v
    return parse


def port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= v <= 65533:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65533, got {text}")
    return v


def sizes(text: str) -> tuple[float, ...]:
    try:
        sizes = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes in MiB like '1,8,32', got {text!r}",
                                         ) from None
    if not sizes or any(not 0 < x <= 4096 for x in sizes):
        raise argparse.ArgumentTypeError(f"sizes are MiB from above 0 to 4096, got {text!r}")
    return sizes


def duration(text: str) -> float:
    """Parses '24h', '90m', '2d', '30s' or plain seconds into seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    num, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        v = float(num) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration like 24h, 90m or 3600, "
                                         f"got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return v


def regex(text: str) -> str:
    """A Python regular expression, checked here: the hosts' samplers compile it."""
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"not a regular expression: {e}") from None
    return text


def fraction(text: str) -> float:
    """Parses a tolerance: '0.2' or '20%'."""
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.2 or 20%, got {text!r}",
                                         ) from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to below 1 (0%..99%), got {text}")
    return v


def inventory(text: str) -> str:
    """-i's value, refused when empty: an unset variable ($SLURM_JOB_NODELIST in a script run
    outside a job) must not turn a check of a cluster into an audit of this machine alone."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty (an unset variable?): name the hosts or an "
                                         "inventory file, or leave -i out to check this "
                                         "machine")
    return text
