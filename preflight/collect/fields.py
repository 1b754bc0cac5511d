"""The typed readers of the probe's untrusted output: each field checked for its type and
cut to its limits, or Malformed naming it. Every section's parser (parse, parse_net,
parse_gpu) reads through them."""

from __future__ import annotations

import math
from typing import Any, Optional, TypeVar

MAX_STR = 4096
MAX_ITEMS = 1024

T = TypeVar("T")


class Malformed(Exception):
    """One field of one section has the wrong type or shape."""


def _get(d: dict[str, Any], key: str) -> Any:
    return d.get(key)


def s(d: dict[str, Any], key: str, required: bool = True) -> Optional[str]:
    v = _get(d, key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise Malformed(f"{key}: expected a string, got {type(v).__name__}")
    return v[:MAX_STR]


def i(d: dict[str, Any], key: str, required: bool = True) -> Optional[int]:
    v = _get(d, key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise Malformed(f"{key}: expected an integer, got {type(v).__name__}")
    return v


def f(d: dict[str, Any], key: str, required: bool = True) -> Optional[float]:
    v = _get(d, key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise Malformed(f"{key}: expected a number, got {v!r:.40}")
    return float(v)


def b(d: dict[str, Any], key: str) -> Optional[bool]:
    v = _get(d, key)
    if v is not None and not isinstance(v, bool):
        raise Malformed(f"{key}: expected true/false, got {type(v).__name__}")
    return v


def obj(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise Malformed(f"{what}: expected an object, got {type(v).__name__}")
    return v


def items(v: Any, what: str) -> list[Any]:
    if not isinstance(v, list):
        raise Malformed(f"{what}: expected a list, got {type(v).__name__}")
    if len(v) > MAX_ITEMS:
        raise Malformed(f"{what}: {len(v)} items, more than the limit of {MAX_ITEMS}")
    return v


def req(v: Optional[T]) -> T:
    """Narrows a value that a required=True accessor already guaranteed."""
    assert v is not None
    return v


def strings(v: Any, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    raw = items(v, what)
    if len(raw) > MAX_ITEMS or not all(isinstance(x, str) for x in raw):
        raise Malformed(f"{what}: expected at most {MAX_ITEMS} strings")
    return tuple(x[:MAX_STR] for x in raw)
