"""One tolerant reader of JSON documents into frozen dataclasses: the types say the shape.

decode(cls, value) walks the dataclass's fields by their annotations. A key the document
lacks takes the field's default (older documents lack newer keys); a key the type does not
know is left alone (newer documents); a value of the wrong kind is one InputError naming the
file and the dotted field. Understood: dataclasses, Optional and Union (a failed probe
section, {"error": ...}, is SectionError), tuple[X, ...], Mapping[str, X], Literal, str
Enums, str, int, float (an int is a float), bool and Any. A dataclass whose `__closed__` is
true refuses keys it does not know (a baseline's profile: a field this release would not
compare must not pass unnoticed).

Where a type allows a SectionError (a probe section), the document is tolerated part by part,
as the renderers always treated a probe section: a section that is missing, or of a shape
this release cannot read, becomes a SectionError saying so; the rest of the report reads."""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any, Optional, TypeVar, Union

from preflight.common.literal import one_of
from preflight.config.errors import InputError, shown
from preflight.model.facts import SectionError

T = TypeVar("T")
_WORDS = {dict: "a mapping", list: "a list", str: "a string", int: "a whole number",
          float: "a number", bool: "true or false", type(None): "null"}


class Mismatch(Exception):
    """A value that does not fit its type, at a dotted field."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(why)
        self.field, self.why = field, why


def decode(cls: type[T], value: Any, path: str, what: str = "a report") -> T:
    """Returns value as cls; raises InputError naming path and the first field that does not
    fit ("not <what> preflight can read: expected ..., got ...")."""
    try:
        return convert(cls, value)
    except Mismatch as e:
        raise InputError(path, f"not {what} preflight can read: {e.why}",
                         field=e.field or None) from None


def convert(cls: type[T], value: Any) -> T:
    """Returns value as cls; raises Mismatch (the dotted field and why) when it does not fit:
    for a reader that words its own error (a results log names the line)."""
    return typing.cast(T, _value(cls, value, ""))


def _got(value: Any) -> str:
    return _WORDS.get(type(value), type(value).__name__) + (
        f" {shown(value, 40)}" if not isinstance(value, (dict, list)) and value is not None
        else "")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules[cls.__module__]
    return typing.get_type_hints(cls, vars(module))


def _value(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        return _union(typing.get_args(tp), value, where)
    if origin is typing.Literal:
        try:
            return one_of(value, typing.get_args(tp))
        except ValueError as e:
            raise Mismatch(where, str(e)[:160]) from None
    if origin is tuple:
        args = typing.get_args(tp)
        if isinstance(value, dict) and len(args) == 2 and args[1] is Ellipsis and \
                typing.get_origin(args[0]) is tuple:
            value = [list(kv) for kv in value.items()]  # pairs a document writes as a mapping
        if not isinstance(value, (list, tuple)):  # a tuple: a document built, not read
            raise Mismatch(where, f"expected a list, got {_got(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise Mismatch(where, f"expected a list of {len(args)}, got {len(value)}")
        return tuple(_value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp) or (str, Any)
        if not isinstance(value, dict):
            raise Mismatch(where, f"expected a mapping, got {_got(value)}")
        return {str(k): _value(args[1], v, f"{where}.{k}" if where else str(k))
                for k, v in value.items()}
    if tp is SectionError:
        if isinstance(value, dict) and isinstance(value.get("error"), str):
            return SectionError(value["error"])
        raise Mismatch(where, f"expected a section's error, got {_got(value)}")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise Mismatch(where, f"{shown(value, 60)} is not one of "
                                  + ", ".join(str(m.value) for m in tp)) from None
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise Mismatch(where, f"expected a number, got {_got(value)}")
    if tp in (int, str, bool):
        if isinstance(value, tp) and not (tp is int and isinstance(value, bool)):
            return value
        raise Mismatch(where, f"expected {_WORDS[tp]}, got {_got(value)}")
    if tp is type(None):
        if value is None:
            return None
        raise Mismatch(where, f"expected null, got {_got(value)}")
    raise TypeError(f"decode: no reader for {tp!r} (at {where or 'the top'})")


def _union(args: tuple[Any, ...], value: Any, where: str) -> Any:
    """The first member that fits; a failed section ({"error": ...}) is SectionError
    wherever the union allows one. The deepest mismatch is the one told."""
    if value is None and type(None) in args:
        return None
    if SectionError in args and isinstance(value, dict) and set(value) == {"error"}:
        return _value(SectionError, value, where)
    best: Optional[Mismatch] = None
    for arg in args:
        if arg is type(None) or arg is SectionError:
            continue
        try:
            return _value(arg, value, where)
        except Mismatch as e:
            if best is None or len(e.field) > len(best.field):
                best = e
    if SectionError in args:  # a probe section this release cannot read: that section only
        at = best.field[len(where) + 1:] if best is not None and best.field != where else ""
        why = best.why if best is not None else f"got {_got(value)}"
        return SectionError(f"not readable in this report: {at + ': ' if at else ''}{why}")
    members = [a for a in args if a is not type(None) and a is not SectionError]
    if best is not None and (best.field != where or len(members) == 1):
        raise best  # inside the value, or the one kind it may be: the precise words
    kinds = " or ".join(dict.fromkeys(_kind(a) for a in args))
    raise Mismatch(where, f"expected {kinds}, got {_got(value)}")


def _kind(tp: Any) -> str:
    if dataclasses.is_dataclass(tp) or typing.get_origin(tp) in (dict, Mapping):
        return "a mapping"
    if typing.get_origin(tp) is tuple:
        return "a list"
    return _WORDS.get(tp, getattr(tp, "__name__", str(tp)))


def _dataclass(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise Mismatch(where, f"expected a mapping, got {_got(value)}")
    hints = _hints(cls)
    if getattr(cls, "__closed__", False):  # a type that refuses what it does not know
        known = {f.name for f in dataclasses.fields(cls)}
        for key in value:
            if key not in known:
                raise Mismatch(where, f"unknown field {key!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        field = f"{where}.{f.name}" if where else f.name
        if f.name in value:
            kwargs[f.name] = _value(hints[f.name], value[f.name], field)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            if SectionError in typing.get_args(hints[f.name]):
                kwargs[f.name] = SectionError("not in this report")  # a section, left out
                continue
            raise Mismatch(field, "missing")
    return cls(**kwargs)
