"""A value read back (a log, a report, a policy, the probe's output) narrowed to one of a
closed set of strings, or a ValueError that names the set."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T", bound=str)


def one_of(value: object, allowed: tuple[T, ...]) -> T:
    """Returns value as the member of allowed it equals; raises ValueError if none."""
    for member in allowed:
        if value == member:
            return member
    raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
