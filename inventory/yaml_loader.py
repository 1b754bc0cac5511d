"""Loads the YAML inventory: defaults, hosts, hostlist ranges expanded pairwise."""

from __future__ import annotations

import os
from typing import Any, Optional

import hostlist

from preflight.config import container
from preflight.config.container import merged
from preflight.config.document import Fields
from preflight.config.yamlfile import line_of
from preflight.config.yamlfile import read as read_yaml
from preflight.inventory import validate as V
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError

TOP_KEYS = {"defaults", "hosts"}
HOST_KEYS = {"address", "user", "port", "identity_file", "known_hosts", "jump", "python",
             "probe_python", "roles", "container"}
DEFAULT_KEYS = (HOST_KEYS - {"address"}) | {"ssh_config"}
VALIDATORS = {
    "address": V.address, "user": V.user, "port": V.port,
    "identity_file": V.file_path, "known_hosts": V.file_path, "jump": V.jump,
    "python": V.command_path, "probe_python": V.command_path, "roles": V.roles,
    "ssh_config": V.file_path,
}
# What is not set here is left to the user's OpenSSH config, then to OpenSSH's defaults
# (resolve.py): the user is the current one, never root by assumption.
BUILTIN_DEFAULTS: dict[str, Any] = {
    "user": None, "port": None, "identity_file": None, "known_hosts": None, "jump": None,
    "python": None, "probe_python": "python3", "roles": V.ROLES, "container": None,
}


def _expand(path: str, pattern: str, host: str, field: str, line: Optional[int]) -> list[str]:
    try:
        return list(hostlist.expand_hostlist(V.bounded_hostlist(pattern)))
    except V.BadValue as e:
        raise InventoryError(path, str(e), host, field, line) from None
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
                                 host, str(key), line_of(d, key))


def _validated(path: str, d: Any, host: Optional[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key == "container":  # its own reader names container.KEY, with the line
            if not isinstance(value, dict):
                raise InventoryError(path, "expected a mapping (runtime, image, ...)", host,
                                     key, line_of(d, key))
            out[key] = container.layer(Fields(path, value, key, host))
            continue
        try:
            out[key] = VALIDATORS[key](value)
        except V.BadValue as e:
            raise InventoryError(path, str(e), host, key, line_of(d, key)) from None
    return out


def load_yaml(path: str, doc: Any = None) -> Inventory:
    """Returns the entries of a YAML inventory; raises InventoryError naming file/host/field."""
    doc = read_yaml(path, InventoryError) if doc is None else doc
    if not isinstance(doc, dict):
        raise InventoryError(path, "expected a mapping with 'hosts' (and optional 'defaults')")
    _check_keys(path, doc, TOP_KEYS, None)
    raw_defaults = doc.get("defaults") or {}
    if not isinstance(raw_defaults, dict):
        raise InventoryError(path, "expected a mapping", None, "defaults", line_of(doc, "defaults"))
    _check_keys(path, raw_defaults, DEFAULT_KEYS, None)
    defaults = dict(BUILTIN_DEFAULTS, **_validated(path, raw_defaults, None))
    raw_hosts = doc.get("hosts")
    if not isinstance(raw_hosts, dict) or not raw_hosts:
        raise InventoryError(path, "expected a non-empty mapping of host names", None, "hosts",
                             line_of(doc, "hosts"))
    base_dir = os.path.dirname(os.path.abspath(path))
    hosts: list[Entry] = []
    seen: dict[str, str] = {}
    for pattern, entry in raw_hosts.items():
        line = line_of(raw_hosts, pattern)
        pattern = str(pattern)
        entry = entry if entry is not None else {}
        if not isinstance(entry, dict):
            raise InventoryError(path, "expected a mapping of host settings", pattern, None, line)
        _check_keys(path, entry, HOST_KEYS, pattern)
        names = _expand(path, pattern, pattern, "name", line)
        if not names or not all(names):  # "": a host with no name, or an empty range part
            raise InventoryError(path, "an empty host name", pattern, "name", line)
        # One cap for the inventory, not only for each range: two hundred ranges each under
        # it would name millions.
        if len(hosts) + len(names) > V.MAX_HOSTS:
            raise InventoryError(path, f"names more than the {V.MAX_HOSTS:,} hosts preflight "
                                 f"accepts in all ({len(hosts):,} before this range, which "
                                 f"adds {len(names):,}; a typo in a range?)", pattern, "name",
                                 line)
        # No address: the name is what ssh is given (an ssh_config alias, or a DNS name).
        raw_address = entry.get("address", pattern)
        if not isinstance(raw_address, str):
            raise InventoryError(path, "expected an IP address or DNS name", pattern, "address",
                                 line_of(entry, "address"))
        addresses = _expand(path, raw_address, pattern, "address", line_of(entry, "address"))
        if len(addresses) != len(names):
            raise InventoryError(
                path, f"range expands to {len(addresses)} address(es) but the name to "
                f"{len(names)} host(s); they pair one to one", pattern, "address",
                line_of(entry, "address") or line)
        own = _validated(path, {k: v for k, v in entry.items() if k != "address"}, pattern)
        settings = dict(defaults, **own)
        # A host's container keys add to the defaults' (its image replaces theirs).
        settings["container"] = merged(defaults["container"], own.get("container")) or None
        addr: Optional[str]
        for name, addr in zip(names, addresses):
            try:
                V.host_name(name)
            except V.BadValue as e:
                raise InventoryError(path, str(e), name, "name", line) from None
            try:
                addr = V.address(addr) if "address" in entry else None
            except V.BadValue as e:
                raise InventoryError(path, str(e), name, "address",
                                     line_of(entry, "address") or line) from None
            if name in seen:
                raise InventoryError(path, f"duplicate host (also from {seen[name]!r})", name,
                                     "name", line)
            seen[name] = pattern
            hosts.append(Entry(
                name=name, address=addr, user=settings["user"], port=settings["port"],
                identity_file=_resolve_file(settings["identity_file"], base_dir),
                known_hosts=_resolve_file(settings["known_hosts"], base_dir),
                jump=settings["jump"], python=settings["python"],
                probe_python=settings["probe_python"], roles=settings["roles"],
                container=settings["container"], path=path, line=line))
    return Inventory(tuple(hosts), path, _resolve_file(defaults.get("ssh_config"), base_dir),
                     "yaml")
