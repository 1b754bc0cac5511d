"""The shape of a JSON report, checked when one is read back (report, diff, audit, launch):
a hand-edited or truncated report is one line naming the file and field, exit 2, never a
renderer's AttributeError. Every key is optional (older reports lack newer ones); a key that
is there has the type the renderers read. Host facts are checked as far as "a mapping of
sections": the renderers read each section defensively (a section may be {"error": ...})."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from preflight.config.errors import InputError

NUM = (int, float)
NONE = type(None)


@dataclass(frozen=True)
class Rec:
    """A mapping with these keys, each optional unless required; other keys are let
    through."""

    keys: Mapping[str, Any]
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    """A mapping of names (strings) to values of one shape."""

    value: Any


Spec = Union[type, tuple[type, ...], Rec, ListOf, MapOf]


def opt(spec: Any) -> tuple[Any, ...]:
    """spec, or null."""
    return (spec, NONE) if not isinstance(spec, tuple) else (*spec, NONE)


STRS = ListOf(str)
FINDING = Rec({"check": str, "status": str, "hosts": STRS, "message": str, "data": opt(dict)})
HOST = Rec({
    "address": opt(str), "status": opt(str), "elapsed_s": opt(NUM), "facts": opt(dict),
    "via": opt(str), "ssh": opt(Rec({"user": opt(str), "port": opt(int), "via": STRS})),
    "failure": opt(Rec({"stage": opt(str), "reason": opt(str)})),
})
ENDPOINT = Rec({"host": str, "endpoint": str})
PLAN = Rec({
    "mode": opt(str), "fits": opt(bool), "lacks": STRS, "notes": STRS, "requested": opt(dict),
    "nproc_per_node": opt(int), "master": opt(str), "servers": ListOf(ENDPOINT),
    "workers": ListOf(ENDPOINT), "excluded": MapOf(STRS),
    "costs": MapOf(Rec({"bytes": int, "with_s": NUM, "without_s": NUM, "factor": opt(NUM),
                        "basis": opt(str)})),
    "nodes": ListOf(Rec({"host": str, "address": opt(str), "rank": opt(int), "nproc": opt(int),
                         "python": opt(str), "ports": ListOf(int), "argv": STRS,
                         "env": MapOf(str), "command": opt(str)})),
})
LINK = Rec({"sender": str, "receiver": str, "phase": opt(str), "received_bps": opt(NUM),
            "sent_bps": opt(NUM), "retransmits": opt(int), "loss_pct": opt(NUM),
            "seconds": opt(NUM), "streams": opt(int), "error": opt(str)},
           required=("sender", "receiver"))
ALLREDUCE = Rec({
    "backend": opt(str), "hosts": STRS, "ranks": opt(int), "error": opt(str),
    "failed": MapOf(str), "log_hints": MapOf(opt(str)), "wall_s": opt(NUM),
    "budget_s": opt(NUM), "predicted_s": opt(NUM), "iters": opt(int), "dropped": STRS,
    "outcome": opt(str), "launch_s": opt(NUM), "progress": MapOf(str), "cut": opt(str),
    "expected": opt(str),
    "sizes": ListOf(Rec({"bytes": int, "seconds": NUM, "algbw_bytes_s": NUM,
                         "busbw_bytes_s": NUM},
                        required=("bytes", "seconds", "algbw_bytes_s", "busbw_bytes_s"))),
})
NETWORK = Rec({
    "schedule": opt(str), "hosts": STRS, "skipped": MapOf(str), "interrupted": opt(bool),
    "wall_s": opt(NUM), "rounds": opt(int), "links": ListOf(LINK), "nic_mbps": MapOf(opt(NUM)),
    "nic_counters": MapOf(Rec({"interface": opt(str), "grew": opt(dict)})),
    "allreduce": opt(ALLREDUCE), "allreduce_skipped": opt(str),
    "allreduce_left_out": MapOf(str),
})
REPORT = Rec({
    "verdict": opt(str), "reasons": STRS, "waived": STRS, "command": opt(str),
    "local": opt(bool), "started_at": opt(NUM), "duration_s": opt(NUM),
    "inventory": opt(str), "inventory_format": opt(str), "ssh_config": opt(str),
    "limit": opt((str, list)), "interrupted": opt(bool), "fail_on": opt(str),
    "hosts": MapOf(HOST), "network": opt(NETWORK), "plan": opt(PLAN),
    "findings": ListOf(FINDING), "audit": opt(dict), "baseline": opt(dict),
    "rechecked_over_ssh": MapOf(str),
})

_WORDS = {dict: "a mapping", list: "a list", str: "a string", int: "a whole number",
          float: "a number", bool: "true or false", NONE: "null"}


def _expected(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(dict.fromkeys(_expected(s) for s in spec))
    if isinstance(spec, (Rec, MapOf)):
        return "a mapping"
    if isinstance(spec, ListOf):
        return "a list"
    return _WORDS.get(spec, getattr(spec, "__name__", "?"))


def problem(value: Any, spec: Any, where: str = "") -> tuple[str, str] | None:
    """Returns (field, what is wrong) for the first value that does not fit spec, or None."""
    if isinstance(spec, tuple):
        tried = [problem(value, s, where) for s in spec]
        if any(f is None for f in tried):
            return None
        # A mapping or list of the right kind with a wrong part inside: name that part.
        deeper = [f for f in tried if f is not None and f[0] != where]
        return deeper[0] if deeper else (where, f"expected {_expected(spec)}, got "
                                                f"{_got(value)}")
    if isinstance(spec, Rec):
        if not isinstance(value, dict):
            return where, f"expected a mapping, got {_got(value)}"
        for key in spec.required:
            if key not in value:
                return f"{where}.{key}" if where else key, "missing"
        for key, sub in spec.keys.items():
            if key in value:
                found = problem(value[key], sub, f"{where}.{key}" if where else key)
                if found:
                    return found
        return None
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            return where, f"expected a mapping, got {_got(value)}"
        for key, sub in value.items():
            found = problem(sub, spec.value, f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return where, f"expected a list, got {_got(value)}"
        for i, item in enumerate(value):
            found = problem(item, spec.item, f"{where}[{i}]")
            if found:
                return found
        return None
    ok = isinstance(value, spec) and not (spec in (int, float) and isinstance(value, bool))
    if spec is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    return None if ok else (where, f"expected {_expected(spec)}, got {_got(value)}")


def _got(value: Any) -> str:
    text = repr(value)
    return _WORDS.get(type(value), type(value).__name__) + (
        f" {text[:40]}" if not isinstance(value, (dict, list)) and value is not None else "")


def check(path: str, doc: Mapping[str, Any]) -> None:
    """Raises InputError naming the file and the first field of the wrong shape."""
    found = problem(doc, REPORT)
    if found:
        field, why = found
        raise InputError(path, f"not a report preflight can read: {why}", field=field or None)
