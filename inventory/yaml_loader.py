"""Loads the YAML inventory: defaults, hosts, hostlist ranges expanded pairwise."""

from __future__ import annotations

import os
from typing import Any, Optional

import hostlist
import yaml

from preflight.inventory import validate as V
from preflight.inventory.errors import InventoryError
from preflight.model.host import Host

TOP_KEYS = {"defaults", "hosts"}
HOST_KEYS = {"address", "user", "port", "identity_file", "known_hosts", "python",
             "probe_python", "roles"}
DEFAULT_KEYS = HOST_KEYS - {"address"}
VALIDATORS = {
    "address": V.address, "user": V.user, "port": V.port,
    "identity_file": V.file_path, "known_hosts": V.file_path,
    "python": V.command_path, "probe_python": V.command_path, "roles": V.roles,
}
BUILTIN_DEFAULTS: dict[str, Any] = {
    "user": "root", "port": 22, "identity_file": None,
    "known_hosts": "~/.ssh/known_hosts", "python": "python3", "probe_python": "python3",
    "roles": V.ROLES,
}


class LineDict(dict[Any, Any]):
    """A mapping that remembers the line of each of its keys (for error messages)."""

    lines: dict[Any, int]


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {out.lines[key]})",
                key_node.start_mark)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = line
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _line(d: Any, key: Any) -> Optional[int]:
    return getattr(d, "lines", {}).get(key)


def _expand(path: str, pattern: str, host: str, field: str, line: Optional[int]) -> list[str]:
    try:
        return list(hostlist.expand_hostlist(pattern))
    except hostlist.BadHostlist as e:
        raise InventoryError(path, f"bad hostlist range {pattern!r}: {e}", host, field,
                             line) from None


def _resolve_file(value: Optional[str], base_dir: str) -> Optional[str]:
    if value is None:
        return None
    p = os.path.expanduser(value)
    return p if os.path.isabs(p) else os.path.normpath(os.path.join(base_dir, p))


def _check_keys(path: str, d: Any, allowed: set[str], host: Optional[str]) -> None:
    for key in d:
        if key not in allowed:
            raise InventoryError(path, f"unknown key (allowed: {', '.join(sorted(allowed))})",
                                 host, str(key), _line(d, key))


def _validated(path: str, d: Any, host: Optional[str]) -> dict[str, Any]:
    out = {}
    for key, value in d.items():
        try:
            out[key] = VALIDATORS[key](value)
        except V.BadValue as e:
            raise InventoryError(path, str(e), host, key, _line(d, key)) from None
    return out


def load_yaml(path: str) -> list[Host]:
    """Returns the hosts of a YAML inventory; raises InventoryError naming file/host/field."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.load(fh, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError:
        raise InventoryError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InventoryError(path, f"cannot read: {e}") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        raise InventoryError(path, f"invalid YAML: {e.problem or e.context}", line=line) from None
    except yaml.YAMLError as e:
        raise InventoryError(path, f"invalid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise InventoryError(path, "expected a mapping with 'hosts' (and optional 'defaults')")
    _check_keys(path, doc, TOP_KEYS, None)
    raw_defaults = doc.get("defaults") or {}
    if not isinstance(raw_defaults, dict):
        raise InventoryError(path, "expected a mapping", None, "defaults", _line(doc, "defaults"))
    _check_keys(path, raw_defaults, DEFAULT_KEYS, None)
    defaults = dict(BUILTIN_DEFAULTS, **_validated(path, raw_defaults, None))
    raw_hosts = doc.get("hosts")
    if not isinstance(raw_hosts, dict) or not raw_hosts:
        raise InventoryError(path, "expected a non-empty mapping of host names", None, "hosts",
                             _line(doc, "hosts"))
    base_dir = os.path.dirname(os.path.abspath(path))
    hosts: list[Host] = []
    seen: dict[str, str] = {}
    for pattern, entry in raw_hosts.items():
        line = _line(raw_hosts, pattern)
        pattern = str(pattern)
        entry = entry if entry is not None else {}
        if not isinstance(entry, dict):
            raise InventoryError(path, "expected a mapping of host settings", pattern, None, line)
        _check_keys(path, entry, HOST_KEYS, pattern)
        names = _expand(path, pattern, pattern, "name", line)
        raw_address = entry.get("address", pattern)
        if not isinstance(raw_address, str):
            raise InventoryError(path, "expected an IP address or DNS name", pattern, "address",
                                 _line(entry, "address"))
        addresses = _expand(path, raw_address, pattern, "address", _line(entry, "address"))
        if len(addresses) != len(names):
            raise InventoryError(
                path, f"range expands to {len(addresses)} address(es) but the name to "
                f"{len(names)} host(s); they pair one to one", pattern, "address",
                _line(entry, "address") or line)
        settings = dict(defaults, **_validated(path, {k: v for k, v in entry.items()
                                                      if k != "address"}, pattern))
        for name, addr in zip(names, addresses):
            try:
                V.host_name(name)
            except V.BadValue as e:
                raise InventoryError(path, str(e), name, "name", line) from None
            try:
                addr = V.address(addr)
            except V.BadValue as e:
                raise InventoryError(path, str(e), name, "address",
                                     _line(entry, "address") or line) from None
            if name in seen:
                raise InventoryError(path, f"duplicate host (also from {seen[name]!r})", name,
                                     "name", line)
            seen[name] = pattern
            hosts.append(Host(
                name=name, address=addr, user=settings["user"], port=settings["port"],
                identity_file=_resolve_file(settings["identity_file"], base_dir),
                known_hosts=_resolve_file(settings["known_hosts"], base_dir),
                python=settings["python"], probe_python=settings["probe_python"],
                roles=settings["roles"]))
    return hosts
