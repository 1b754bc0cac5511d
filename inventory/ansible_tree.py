"""An Ansible inventory path as Ansible reads it: a directory of inventory files (`-i
inventory/`), and the `group_vars/` and `host_vars/` beside an inventory (in that directory, or
beside the one file given).

- A directory: every file in it and its subdirectories, in name order, read as Ansible INI or
  Ansible YAML and merged (a group named in two files is one group). Skipped as Ansible skips
  them: hidden names, `group_vars/`, `host_vars/`, `vars_plugins/`, and the extensions of
  ansible-core's INVENTORY_IGNORE_EXTS (`.orig`, `.cfg`, `.retry`, `~`, `.bak`, `.swp`,
  `.md`, `.txt`, `.rst`, `.pyc`, `.pyo`, `.rpm`). A file neither reads is an error naming it
  (Ansible warns and goes on without its hosts; preflight would then check fewer hosts than
  the playbook reaches): an inventory plugin's config or a script is not run here.
- group_vars/NAME and host_vars/NAME: a YAML or JSON file (`NAME`, `NAME.yml`, `.yaml`,
  `.json`) or a directory of them, read in name order, as the host_group_vars plugin does.
  Files encrypted with Ansible Vault are skipped: they hold secrets, which preflight never
  reads. Precedence, as Ansible's: the inventory's group variables, then group_vars/all,
  then group_vars of the host's groups (parents first), then the inventory's host
  variables, then host_vars."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from preflight.config.errors import read_input
from preflight.config.yamlfile import line_of
from preflight.config.yamlfile import parse as parse_yaml
from preflight.inventory.errors import InventoryError

IGNORED_EXTS = (".orig", ".cfg", ".retry", "~", ".bak", ".swp", ".md", ".txt", ".rst", ".pyc",
                ".pyo", ".rpm")
IGNORED_DIRS = ("group_vars", "host_vars", "vars_plugins")
VARS_EXTS = ("", ".yml", ".yaml", ".json")
MAX_FILES = 1000  # a directory tree that is not an inventory (a home directory) is refused
VAULT = "$ANSIBLE_VAULT"


@dataclass
class VarsFile:
    path: str
    values: dict[str, Any]
    doc: Any  # the parsed mapping, for the line of each key

    def line(self, key: str) -> Optional[int]:
        return line_of(self.doc, key)


@dataclass
class VarsDirs:
    """What group_vars/ and host_vars/ hold: {group or host: its files, in the order read}."""

    groups: dict[str, list[VarsFile]] = field(default_factory=dict)
    hosts: dict[str, list[VarsFile]] = field(default_factory=dict)


def inventory_files(root: str) -> list[str]:
    """The files of an inventory directory Ansible would read, in its order."""
    found: list[str] = []

    def walk(d: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            raise InventoryError(d, f"cannot read the directory: {e.strerror or e}") from None
        for name in names:
            path = os.path.join(d, name)
            if name.startswith(".") or name.endswith(IGNORED_EXTS):
                continue
            if os.path.isdir(path):
                if name not in IGNORED_DIRS and depth < 8:
                    walk(path, depth + 1)
                continue
            found.append(path)
            if len(found) > MAX_FILES:
                raise InventoryError(root, f"more than {MAX_FILES} files: not an inventory "
                                     "directory")

    walk(root, 0)
    if not found:
        raise InventoryError(root, "the directory holds no inventory file")
    return found


def _vars_file(path: str) -> Optional[VarsFile]:
    text = read_input(path, InventoryError)
    if text.lstrip().startswith(VAULT):
        return None
    doc = parse_yaml(path, text, InventoryError)
    if doc is None:
        return VarsFile(path, {}, {})
    if not isinstance(doc, dict):
        raise InventoryError(path, "expected a mapping of variables")
    return VarsFile(path, {str(k): v for k, v in doc.items()}, doc)


def _files_of(path: str) -> list[str]:
    """A vars entry's files: the file itself, or a directory's valid files (recursively)."""
    if not os.path.isdir(path):
        return [path]
    out: list[str] = []
    for name in sorted(os.listdir(path)):
        if name.startswith(".") or name.endswith("~"):
            continue
        sub = os.path.join(path, name)
        if os.path.isdir(sub) or os.path.splitext(name)[1] in VARS_EXTS:
            out += _files_of(sub)
    return out


def vars_dirs(base: str) -> VarsDirs:
    """The group_vars/ and host_vars/ of the directory base (empty where there are none)."""
    out = VarsDirs()
    for kind, into in (("group_vars", out.groups), ("host_vars", out.hosts)):
        d = os.path.join(base, kind)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.startswith(".") or name.endswith("~"):
                continue
            path = os.path.join(d, name)
            stem, ext = (name, "") if os.path.isdir(path) else os.path.splitext(name)
            if ext not in VARS_EXTS:
                continue
            for f in _files_of(path):
                vf = _vars_file(f)
                if vf is not None:
                    into.setdefault(stem, []).append(vf)
    return out
