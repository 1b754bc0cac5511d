"""YAML input files, read one way: safe types only, a repeated key refused (PyYAML keeps the
last one silently), and the line of every key kept, so that every error can say file:line."""

from __future__ import annotations

from typing import Any, Optional

import yaml

from preflight.config.errors import InputError, read_input


class LineDict(dict[Any, Any]):
    """A mapping that remembers the line of each of its keys (for error messages)."""

    lines: dict[Any, int]


# What aliases may add to a document, in nodes, counted as if each alias were written out
# in full: an anchor reused for a few groups' vars adds hundreds; nested aliases (a few
# hundred bytes that name each other nine deep) add billions, and every walk of what they
# build (a merge of vars, an error message's repr) takes that long and that much memory.
ALIASED_NODES_MAX = 100_000


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, records each key's line, and refuses a
    document whose aliases would add more than ALIASED_NODES_MAX nodes written out."""

    def construct_document(self, node: yaml.Node) -> Any:
        _refuse_expansion(node)
        return super().construct_document(node)


def _refuse_expansion(root: yaml.Node) -> None:
    """Raises a ConstructorError where the document written out (each alias as a copy of its
    anchor's node) has ALIASED_NODES_MAX nodes more than it has, or an alias inside itself.
    One pass over its nodes, each node's written-out size counted once."""
    size: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        kids = _children(node)
        if done:
            open_.discard(id(node))
            size[id(node)] = 1 + sum(size[id(k)] for k in kids)
            distinct += 1
            if size[id(node)] - distinct > ALIASED_NODES_MAX:
                raise yaml.constructor.ConstructorError(
                    None, None, f"its aliases would write out over {ALIASED_NODES_MAX:,} more "
                    "nodes (nested aliases: refused)", node.start_mark)
            continue
        if id(node) in open_:
            raise yaml.constructor.ConstructorError(
                None, None, "an alias inside the node it names (refused)", node.start_mark)
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    return []


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
    except RecursionError:
        raise error(path, "invalid YAML: nested too deep") from None
