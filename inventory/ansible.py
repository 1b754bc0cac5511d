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
variable is an error. Passwords (ansible_password) are never read."""

from __future__ import annotations

import json
import os
import re
import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from preflight.config import container
from preflight.config.document import Fields
from preflight.config.yamlfile import line_of
from preflight.inventory import validate as V
from preflight.inventory.ansible_tree import VarsDirs, vars_dirs
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError
from preflight.inventory.resolve import jump_from_proxy_command
from preflight.model.container import ContainerLayer

ALIASES = {"ansible_ssh_host": "ansible_host", "ansible_ssh_port": "ansible_port",
           "ansible_ssh_user": "ansible_user"}
# A section header, as the INI plugin matches it: [group] or [group:kind], then a comment.
SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")


def has_sections(text: str) -> bool:
    """True when some line is an INI section header: the text is an Ansible INI inventory."""
    return any(SECTION.match(line.strip()) for line in text.splitlines())


PREFLIGHT_VARS = {"preflight_python", "preflight_probe_python", "preflight_roles",
                  "preflight_jump", "preflight_container"}


@dataclass
class Group:
    name: str
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass
class Parsed:
    """Groups, and each host's own variables and first line, in the order hosts appear."""

    path: str  # the inventory: a file, or the directory its files are in
    groups: dict[str, Group] = field(default_factory=dict)
    host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    host_line: dict[str, Optional[int]] = field(default_factory=dict)
    host_path: dict[str, str] = field(default_factory=dict)  # the file a host is first in
    reading: str = ""  # the file being read into it (a directory's files one by one)

    def group(self, name: str) -> Group:
        return self.groups.setdefault(name, Group(name))

    def add_host(self, name: str, group: str, variables: Mapping[str, Any],
                 line: Optional[int]) -> None:
        if name not in self.host_vars:
            self.host_vars[name] = {}
            self.host_line[name] = line
            self.host_path[name] = self.reading or self.path
        self.host_vars[name].update(variables)
        g = self.group(group)
        if name not in g.hosts:
            g.hosts.append(name)


# ------------------------------------------------------------------ host ranges
def expand_pattern(pattern: str) -> list[str]:
    """Expands Ansible's ranges: 'www[01:50].x', 'db-[a:f]', 'h[0:10:2]' (inclusive; a
    leading zero pads the numbers); raises ValueError."""
    if "[" not in pattern:
        return [pattern]
    head, _, rest = pattern.partition("[")
    body, sep, tail = rest.partition("]")
    if not sep:
        raise ValueError(f"{pattern!r}: '[' without ']'")
    parts = body.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"{pattern!r}: a range is [start:end] or [start:end:step]")
    start, end = parts[0], parts[1]
    step = int(parts[2]) if len(parts) == 3 and parts[2] else 1
    if step < 1:
        raise ValueError(f"{pattern!r}: the step must be positive")
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") and len(start) > 1 else 0
        numbers = range(int(start), int(end) + 1, step)
        if len(numbers) > V.MAX_HOSTS:
            raise ValueError(f"{pattern!r}: [{body}] is {len(numbers):,} hosts, more than the "
                             f"{V.MAX_HOSTS:,} preflight accepts (a typo in a range?)")
        values = [str(i).zfill(width) for i in numbers]
    elif len(start) == 1 and len(end) == 1 and start in string.ascii_letters and \
            end in string.ascii_letters:
        values = [chr(c) for c in range(ord(start), ord(end) + 1, step)]
    else:
        raise ValueError(f"{pattern!r}: [{body}] is neither a numeric nor a letter range")
    if not values:
        raise ValueError(f"{pattern!r}: the range [{body}] is empty")
    tails = expand_pattern(tail)
    if len(values) * len(tails) > V.MAX_HOSTS:
        raise ValueError(f"{pattern!r} expands to {len(values) * len(tails):,} hosts, more "
                         f"than the {V.MAX_HOSTS:,} preflight accepts (a typo in a range?)")
    return [head + v + t for v in values for t in tails]


def split_port(pattern: str) -> tuple[str, Optional[str]]:
    """'host:2222' -> ('host', '2222'), as the INI plugin reads it (not for IPv6)."""
    if pattern.count(":") == 1:
        host, port = pattern.split(":")
        if port.isdigit():
            return host, port
    return pattern, None


# ------------------------------------------------------------------ INI
def _value(text: str) -> Any:
    """An INI value as Ansible types it on a host line: numbers become numbers."""
    return int(text) if text.isdigit() else text


def parse_ini(path: str, text: str, into: Optional[Parsed] = None) -> Parsed:
    p = into or Parsed(path)
    p.reading = path
    p.group("all")
    section, kind = "ungrouped", "hosts"
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = SECTION.match(line)
        if m or (line.startswith("[") and line.endswith("]")):
            name, kind = (m.group(1), m.group(2) or "hosts") if m else ("", "")
            if not name or kind not in ("hosts", "vars", "children"):
                raise InventoryError(path, f"bad section {line!r} (expected [group], "
                                     "[group:vars] or [group:children])", line=n)
            section = name
            p.group(section)
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as e:
            raise InventoryError(path, f"cannot split the line: {e}", line=n) from None
        if not tokens:
            continue
        if kind == "vars":
            key, eq, value = line.partition("=")
            if not eq:
                raise InventoryError(path, "expected key=value in a :vars section", line=n)
            p.group(section).vars[key.strip()] = _value(
                " ".join(shlex.split(value, comments=True)))
        elif kind == "children":
            child = tokens[0]
            p.group(child)
            if child not in p.group(section).children:
                p.group(section).children.append(child)
        else:
            variables: dict[str, Any] = {}
            for tok in tokens[1:]:
                key, eq, value = tok.partition("=")
                if not eq:
                    raise InventoryError(path, f"expected key=value after the host, got "
                                         f"{tok!r}", tokens[0], line=n)
                variables[key] = _value(value)
            name, port = split_port(tokens[0])
            if port is not None:
                variables.setdefault("ansible_port", int(port))
            try:
                names = expand_pattern(name)
            except ValueError as e:
                raise InventoryError(path, str(e), tokens[0], "name", n) from None
            for host in names:
                p.add_host(host, section, variables, n)
    return p


# ------------------------------------------------------------------ YAML
def _mapping(value: Any) -> Any:
    """A section as the YAML plugin takes it: one host or group written without a colon
    (`hosts: test5`) is a mapping of one."""
    if value is None:
        return {}
    return {value: None} if isinstance(value, str) else value


def parse_yaml(path: str, doc: Mapping[str, Any], into: Optional[Parsed] = None) -> Parsed:
    p = into or Parsed(path)
    p.reading = path
    p.group("all")

    def walk(name: str, body: Any, where: Mapping[str, Any], seen: tuple[str, ...]) -> None:
        if name in seen:
            raise InventoryError(path, f"group {name!r} is its own child", None, name,
                                 line_of(where, name))
        group = p.group(name)
        if body is None:
            return
        if not isinstance(body, dict):
            raise InventoryError(path, "expected a mapping with hosts, children or vars",
                                 None, name, line_of(where, name))
        for key in body:
            if key not in ("hosts", "children", "vars"):
                raise InventoryError(path, f"unknown key in group {name!r} (allowed: "
                                     "children, hosts, vars)", None, str(key),
                                     line_of(body, key))
        hosts = _mapping(body.get("hosts"))
        if not isinstance(hosts, dict):
            raise InventoryError(path, "expected a mapping of hosts", None, f"{name}.hosts",
                                 line_of(body, "hosts"))
        for pattern, hv in hosts.items():
            hv = hv or {}
            if not isinstance(hv, dict):
                raise InventoryError(path, "expected a mapping of host variables",
                                     str(pattern), None, line_of(hosts, pattern))
            host_name, port = split_port(str(pattern))
            variables = dict(hv)
            if port is not None:
                variables.setdefault("ansible_port", int(port))
            try:
                names = expand_pattern(host_name)
            except ValueError as e:
                raise InventoryError(path, str(e), str(pattern), "name",
                                     line_of(hosts, pattern)) from None
            for h in names:
                p.add_host(h, name, variables, line_of(hosts, pattern))
        gvars = body.get("vars") or {}
        if not isinstance(gvars, dict):
            raise InventoryError(path, "expected a mapping of variables", None,
                                 f"{name}.vars", line_of(body, "vars"))
        group.vars.update(gvars)
        children = _mapping(body.get("children"))
        if not isinstance(children, dict):
            raise InventoryError(path, "expected a mapping of child groups", None,
                                 f"{name}.children", line_of(body, "children"))
        for child, child_body in children.items():
            if str(child) not in group.children:
                group.children.append(str(child))
            walk(str(child), child_body, children, seen + (name,))

    for name, body in doc.items():
        walk(str(name), body, doc, ())
    return p


# ------------------------------------------------------------------ to entries
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
            jump = V.jump(found) if found else None
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
