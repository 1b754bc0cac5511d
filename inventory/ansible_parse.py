"""Ansible inventories' text into groups and hosts, the way Ansible's `ini` and `yaml`
inventory plugins read them: sections and `:children`/`:vars`, YAML groups, host ranges
(`www[01:50]`, `db-[a:f]`, `[0:10:2]`) and `host:port`. Which variables apply to a host, and
how it is reached, is ansible.py's."""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from preflight.config.yamlfile import line_of
from preflight.inventory import validate as V
from preflight.inventory.errors import InventoryError

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
    # Host names written so far, repeats included (a range written on many lines): bounded,
    # so that a few KiB of ranges cannot name millions.
    written: int = 0
    members: set[tuple[str, str]] = field(default_factory=set)  # (group, host) pairs

    def group(self, name: str) -> Group:
        return self.groups.setdefault(name, Group(name))

    def add_host(self, name: str, group: str, variables: Mapping[str, Any],
                 line: Optional[int]) -> None:
        self.written += 1
        new = name not in self.host_vars
        if self.written > WRITTEN_MAX or (new and len(self.host_vars) >= V.MAX_HOSTS):
            raise InventoryError(self.reading or self.path, (
                f"writes over {WRITTEN_MAX:,} host names, repeats included"
                if self.written > WRITTEN_MAX else
                f"names more than the {V.MAX_HOSTS:,} hosts preflight accepts") +
                " in all (a typo in a range, or ranges repeated?)", name, "name", line)
        if new:
            self.host_vars[name] = {}
            self.host_line[name] = line
            self.host_path[name] = self.reading or self.path
        self.host_vars[name].update(variables)
        g = self.group(group)
        if (group, name) not in self.members:  # a set: a list's `in` made 20,000 hosts slow
            self.members.add((group, name))
            g.hosts.append(name)


# Host names an inventory may write, repeats included (each host in a few groups).
WRITTEN_MAX = 10 * V.MAX_HOSTS


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
