"""Ansible inventories, INI and YAML, read the way Ansible's `ini` and `yaml` inventory plugins
read them: groups, `:children`, `:vars`, the implicit `all`, host ranges (`www[01:50]`,
`db-[a:f]`, `[0:10:2]`), `host:port`, and variables with Ansible's precedence (all, then
parent groups before child groups, same depth by name, then the host's own).

Only the variables that say how to reach and run a host are read: ansible_host,
ansible_port, ansible_user, ansible_ssh_private_key_file, ansible_python_interpreter (the
deprecated ansible_ssh_* spellings too), a ProxyJump in ansible_ssh_common_args or
ansible_ssh_extra_args, and preflight_python / preflight_probe_python / preflight_roles /
preflight_container (where the job runs: a mapping, or JSON in INI).
Everything else an inventory carries for its playbooks is left alone; a misspelt preflight_*
variable is an error. Passwords (ansible_password) are never read. The text is read into
groups and hosts by ansible_parse.py; this module applies the variables and makes the
entries."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any, Optional

from preflight.config import container
from preflight.config.document import Fields
from preflight.inventory import validate as V
from preflight.inventory.ansible_parse import ALIASES as ALIASES
from preflight.inventory.ansible_parse import PREFLIGHT_VARS as PREFLIGHT_VARS
from preflight.inventory.ansible_parse import Parsed as Parsed
from preflight.inventory.ansible_parse import expand_pattern as expand_pattern
from preflight.inventory.ansible_parse import has_sections as has_sections
from preflight.inventory.ansible_parse import parse_ini as parse_ini
from preflight.inventory.ansible_parse import parse_yaml as parse_yaml
from preflight.inventory.ansible_tree import VarsDirs, vars_dirs
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError
from preflight.inventory.resolve import jump_from_proxy_command
from preflight.model.container import ContainerLayer


def _depths(p: Parsed) -> dict[str, int]:
    """Each group's depth below `all` (the deepest path wins, as in Ansible)."""
    depth = {"all": 0}
    parents: dict[str, set[str]] = {}
    for g in p.groups.values():
        for c in g.children:
            parents.setdefault(c, set()).add(g.name)

    def of(name: str, trail: tuple[str, ...]) -> int:
        if name in depth:
            return depth[name]
        if name in trail:
            raise InventoryError(p.path, f"group {name!r} is its own child (through "
                                 f"{' > '.join(trail)})")
        ups = parents.get(name, set())
        d = 1 + max((of(u, trail + (name,)) for u in ups), default=0)
        depth[name] = d
        return d

    for name in p.groups:
        of(name, ())
    return depth


def _member_of(p: Parsed) -> dict[str, set[str]]:
    """Every group each host belongs to, through children too (all included)."""
    member: dict[str, set[str]] = {h: {"all"} for h in p.host_vars}

    def add(group: str, into: str, trail: tuple[str, ...]) -> None:
        if group in trail:
            return
        g = p.groups[group]
        for h in g.hosts:
            member[h].add(into)
        for c in g.children:
            add(c, into, trail + (group,))

    for name in p.groups:
        add(name, name, ())
    return member


def _jump_of(path: str, host: str, args: str) -> Optional[str]:
    """A ProxyJump in ansible_ssh_common_args: -J HOP, -o ProxyJump=HOP, or the classic
    -o ProxyCommand="ssh -W %h:%p HOP"."""
    try:
        argv = shlex.split(args)
    except ValueError as e:
        raise InventoryError(path, f"cannot split: {e}", host, "ansible_ssh_common_args") \
            from None
    for i, a in enumerate(argv):
        value = None
        if a == "-J" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("-J") and len(a) > 2:
            return a[2:]
        if a == "-o" and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith("-o") and len(a) > 2:
            value = a[2:]
        if value:
            key, _, v = value.replace("=", " ", 1).partition(" ")
            if key.lower() == "proxyjump":
                return v.strip()
            if key.lower() == "proxycommand":
                hop = jump_from_proxy_command(v.strip())
                if hop is None:
                    raise InventoryError(path, "only 'ssh -W %h:%p HOST' ProxyCommands are "
                                         "supported; use -J HOST", host,
                                         "ansible_ssh_common_args")
                return hop
    return None


def to_inventory(p: Parsed, fmt: str, beside: Optional[VarsDirs] = None) -> Inventory:
    """The entries of a parsed inventory, each host's variables merged with Ansible's
    precedence; beside: the group_vars/ and host_vars/ of its directory."""
    depth = _depths(p)
    member = _member_of(p)
    beside = beside or VarsDirs()
    entries = []
    for host, own in p.host_vars.items():
        groups = sorted(member[host], key=lambda g: (depth.get(g, 0), g))
        path, line = p.host_path.get(host, p.path), p.host_line.get(host)
        # The layers in Ansible's order, each with the file (and line) that set its values:
        # an error names where a variable was set last.
        own_file = (path, {k: line for k in own})
        layers = [(p.groups[g].vars, (path, {k: line for k in p.groups[g].vars}))
                  for g in groups]
        layers += [(vf.values, (vf.path, {k: vf.line(k) for k in vf.values}))
                   for g in groups for vf in beside.groups.get(g, ())]  # `all` sorts first
        layers += [(own, own_file)]
        layers += [(vf.values, (vf.path, {k: vf.line(k) for k in vf.values}))
                   for vf in beside.hosts.get(host, ())]
        merged: dict[str, Any] = {}
        origin: dict[str, tuple[str, Optional[int]]] = {}
        for values, (where, lines) in layers:
            for k, v in values.items():
                merged[ALIASES.get(k, k)] = v
                origin[ALIASES.get(k, k)] = (where, lines[k])
        entries.append(_entry(path, host, merged, tuple(g for g in groups if g != "all"),
                              line, origin))
    if not entries:
        raise InventoryError(p.path, "the Ansible inventory lists no hosts")
    return Inventory(tuple(entries), p.path, None, fmt)


def _entry(path: str, host: str, v: Mapping[str, Any], groups: tuple[str, ...],
           line: Optional[int],
           origin: Optional[Mapping[str, tuple[str, Optional[int]]]] = None) -> Entry:
    def at(key: str) -> tuple[str, Optional[int]]:
        """The file (and line) that set key: the inventory's, or a group_vars/host_vars
        file."""
        return (origin or {}).get(key, (path, line))

    def get(key: str, check: Any) -> Any:
        if key not in v or v[key] in (None, ""):
            return None
        value = v[key]
        if key == "ansible_port" and isinstance(value, str) and value.isdigit():
            value = int(value)
        try:
            return check(value)
        except V.BadValue as e:
            raise InventoryError(at(key)[0], str(e), host, key, at(key)[1]) from None

    for key in v:
        if key.startswith("preflight_") and key not in PREFLIGHT_VARS:
            raise InventoryError(at(key)[0], f"unknown variable (preflight reads: "
                                 f"{', '.join(sorted(PREFLIGHT_VARS))})", host, key,
                                 at(key)[1])
    if str(v.get("ansible_connection", "ssh")) not in ("ssh", "smart", "paramiko"):
        raise InventoryError(at("ansible_connection")[0], f"ansible_connection="
                             f"{v['ansible_connection']} is not supported: preflight reaches "
                             "hosts over SSH", host, "ansible_connection",
                             at("ansible_connection")[1])
    try:
        V.host_name(host)
    except V.BadValue as e:
        raise InventoryError(path, str(e), host, "name", line) from None
    interpreter = get("ansible_python_interpreter", V.command_path)
    jump = get("preflight_jump", V.jump)
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if jump is None and isinstance(v.get(key), str):
            found = _jump_of(at(key)[0], host, v[key])
            try:
                jump = V.jump(found) if found else None
            except V.BadValue as e:  # bad input, said as such (was an internal error)
                raise InventoryError(at(key)[0], f"its ProxyJump: {e}", host, key,
                                     at(key)[1]) from None
    roles = get("preflight_roles", lambda x: V.roles(x.split(",") if isinstance(x, str)
                                                     and "," in x else x))
    key_file = get("ansible_ssh_private_key_file", V.file_path)
    return Entry(name=host, address=get("ansible_host", V.address),
                 user=get("ansible_user", V.user), port=get("ansible_port", V.port),
                 identity_file=key_file and os.path.expanduser(key_file),
                 jump=jump,
                 python=get("preflight_python", V.command_path), interpreter=interpreter,
                 probe_python=get("preflight_probe_python", V.command_path) or interpreter
                 or "python3",
                 roles=roles or V.ROLES, groups=groups,
                 container=_container(*at("preflight_container")[:1], host,
                                      v.get("preflight_container"),
                                      at("preflight_container")[1]),
                 path=path, line=line)


def _container(path: str, host: str, value: Any, line: Optional[int]
               ) -> Optional[ContainerLayer]:
    """preflight_container: the job's container as a group or host gives it (a mapping; in
    INI, one as JSON). As every Ansible variable, the nearest group or the host replaces it
    whole; key by key it adds to the policy's and the command line's."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise InventoryError(path, "expected a mapping (INI: as JSON, "
                                 '\'{"image": "paddle:3.3.1"}\')', host, "preflight_container",
                                 line) from None
    if not isinstance(value, dict):
        raise InventoryError(path, "expected a mapping (runtime, image, ...)", host,
                             "preflight_container", line)
    return container.layer(Fields(path, value, "preflight_container", host, line))


def _beside(path: str) -> VarsDirs:
    return vars_dirs(os.path.dirname(os.path.abspath(path)))


def load_ini(path: str, text: str) -> Inventory:
    return to_inventory(parse_ini(path, text), "ansible-ini", _beside(path))


def load_yaml(path: str, doc: Mapping[str, Any]) -> Inventory:
    return to_inventory(parse_yaml(path, doc), "ansible-yaml", _beside(path))
