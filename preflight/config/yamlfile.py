"""YAML input files, read one way: safe types only, a repeated key refused (PyYAML keeps the
last one silently), and the line of every key kept, so that every error can say file:line."""

from __future__ import annotations

from typing import Any, Optional

import yaml

from preflight.config.errors import InputError, read_input


class LineDict(dict[Any, Any]):
    """A mapping that remembers the line of each of its keys (for error messages)."""

    lines: dict[Any, int]


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and records each key's line."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            seen = key in out
        except TypeError:  # an unhashable key ({[1]: x}): YAML allows it, a mapping cannot
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a plain value, not {type(key).__name__}",
                key_node.start_mark) from None
        if seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {out.lines[key]})",
                key_node.start_mark)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = line
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def line_of(mapping: Any, key: Any) -> Optional[int]:
    """Returns the line of key in a mapping read by read(), if known."""
    return getattr(mapping, "lines", {}).get(key)


def read(path: str, error: type[InputError] = InputError) -> Any:
    """Returns the document of a YAML file (mappings as LineDicts); raises `error`, one line
    naming the file and line, when it is missing, unreadable, not YAML or repeats a key."""
    return parse(path, read_input(path, error), error)


def parse(path: str, text: str, error: type[InputError] = InputError) -> Any:
    """Returns the YAML document of text read from path (see read)."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise error(path, f"invalid YAML: {e.problem or e.context}",
                    line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise error(path, f"invalid YAML: {e}") from None
