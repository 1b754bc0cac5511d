"""Inventory loaders: load(source) returns the hosts to check, as SSH will reach them, or
raises InventoryError (one line naming the file, host and field).

A source is a file — preflight's YAML, an Ansible inventory (INI or YAML), a hostfile — told
apart by its content (or named by `fmt`), hosts on the command line (`node[01-16]`, `a,b,c`),
or the current Slurm allocation. Each host is then completed from the user's OpenSSH config
(resolve.py), and `--limit` picks among them."""

from __future__ import annotations

import os
import re
from typing import Optional

import preflight.inventory.ansible as ansible
import preflight.inventory.ansible_dir as ansible_dir
import preflight.inventory.hostfile as hostfile
import preflight.inventory.hostlist_source as hostlist_source
import preflight.inventory.limit as limit
import preflight.inventory.sshconfig as sshconfig
from preflight.config.errors import read_input
from preflight.config.yamlfile import parse as parse_yaml
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError
from preflight.inventory.resolve import ContainerLayers, resolve
from preflight.inventory.yaml_loader import TOP_KEYS, load_yaml
from preflight.model.host import Host

FORMATS = ("auto", "yaml", "ansible-ini", "ansible-yaml", "hostfile", "list", "slurm")
SELF_LISTED = ("slurm",)  # formats that list hosts with no source given (the allocation's)
ACCEPTED = ("accepted: preflight YAML (defaults, hosts), an Ansible inventory (INI or YAML), "
            "a hostfile (one host per line, 'host slots=N' or 'host:N'), hosts on the command "
            "line (-i 'node[01-16]' or -i a,b,c) or the Slurm allocation (--inventory-format "
            "slurm)")
_KEY_VALUE = re.compile(r"^\s*\S+\s+\S+=", re.MULTILINE)
ANSIBLE_GROUP_KEYS = {"hosts", "children", "vars"}


def _is_ansible_yaml(doc: dict[object, object]) -> bool:
    """Groups at the top: `all`, or any group with hosts, children or vars (the Ansible
    reader then says precisely what else is wrong)."""
    return bool(doc) and ("all" in doc or any(
        isinstance(v, dict) and ANSIBLE_GROUP_KEYS & set(v) for v in doc.values()))


def _yaml_mapping(path: str, text: str) -> bool:
    try:
        return isinstance(parse_yaml(path, text, InventoryError), dict)
    except InventoryError:
        return False


def _from_yaml(path: str, text: str, fmt: str) -> Inventory:
    doc = parse_yaml(path, text, InventoryError)
    ours = isinstance(doc, dict) and set(doc) <= TOP_KEYS
    if fmt == "yaml" or (fmt == "auto" and ours):
        return load_yaml(path, doc)  # its own errors say what is wrong
    if isinstance(doc, dict) and (fmt == "ansible-yaml" or (fmt == "auto" and
                                                            _is_ansible_yaml(doc))):
        return ansible.load_yaml(path, doc)
    if fmt == "auto" and isinstance(doc, dict) and TOP_KEYS & set(doc):
        return load_yaml(path, doc)  # preflight's YAML with a mistake: say which
    if fmt == "ansible-yaml":
        raise InventoryError(path, "not an Ansible YAML inventory: expected a mapping of "
                             "groups, each with hosts, children or vars")
    raise InventoryError(path, f"not an inventory preflight reads ({ACCEPTED})")


def read(source: Optional[str], fmt: str = "auto") -> Inventory:
    """Returns the entries of a source, before the OpenSSH config is applied."""
    if fmt == "slurm":
        return hostlist_source.from_slurm() if source is None else \
            hostlist_source.load(source, source, "slurm")
    if source is None:
        raise InventoryError("-i", "no inventory given")
    if fmt == "list":
        return hostlist_source.load(source, f"-i {source}")
    if os.path.isdir(source):
        if fmt not in ("auto", "ansible-ini", "ansible-yaml"):
            raise InventoryError(source, f"a directory is read as an Ansible inventory, not "
                                 f"as {fmt}")
        return ansible_dir.load(source)
    if not os.path.isfile(source):
        if fmt == "auto" and ("," in source or "[" in source) and not os.path.exists(source):
            return hostlist_source.load(source, f"-i {source}")
        raise InventoryError(source, "no such file (hosts on the command line need a comma "
                             "or a range: -i 'node01,' or -i 'node[01-16]')")
    text = read_input(source, InventoryError)
    if fmt == "ansible-ini":
        return ansible.load_ini(source, text)
    if fmt == "hostfile":
        return hostfile.load(source, text)
    if fmt in ("yaml", "ansible-yaml"):
        return _from_yaml(source, text, fmt)
    # A file named .yaml or .yml is YAML: its mistakes are said as YAML's, with their line,
    # never read again as INI or a hostfile (a typo made it an inventory of other hosts).
    if fmt == "auto" and os.path.splitext(source)[1].lower() in (".yaml", ".yml"):
        try:
            return _from_yaml(source, text, fmt)
        except InventoryError as e:
            if not (ansible.has_sections(text) or hostfile.looks_like(text)):
                raise
            raise InventoryError(source, f"named {os.path.splitext(source)[1]} but not YAML "
                                 "(it reads as an Ansible INI inventory or a hostfile): name "
                                 "it for what it is, or give --inventory-format; as YAML: "
                                 f"{e.message}") from None
    # A YAML mapping is YAML, whatever its quoted strings hold: a value spanning lines can
    # hold a "[group]" line, and only then does the INI reader get its turn.
    if not _yaml_mapping(source, text):
        if ansible.has_sections(text):
            return ansible.load_ini(source, text)
        if hostfile.looks_like(text) or hostfile.meant(text):
            return hostfile.load(source, text)
    try:
        return _from_yaml(source, text, fmt)
    except InventoryError as e:
        if _KEY_VALUE.search(text):  # host lines with variables: Ansible INI, no sections
            return ansible.load_ini(source, text)
        if "not an inventory" in str(e) or not text.strip():
            raise InventoryError(source, f"not an inventory preflight reads ({ACCEPTED})") \
                from None
        raise


def load(source: Optional[str], fmt: str = "auto", ssh_config: Optional[str] = None,
         limit_to: Optional[str] = None,
         containers: ContainerLayers = (None, None), python: Optional[str] = None,
         ) -> list[Host]:
    """Returns the hosts of a source with the OpenSSH config applied (ssh_config: -F; else
    the inventory's own, else ~/.ssh/config and /etc/ssh/ssh_config) and --limit;
    containers: the job's container as the policy and the command line give it, merged with
    the inventory's for every host; python: the training interpreter of the hosts whose
    entry names none (--python)."""
    inv = read(source, fmt)
    _refuse_folded_twice(inv)
    config = sshconfig.load(ssh_config or inv.ssh_config)
    hosts = resolve(inv, config, containers, python)
    return limit.apply(hosts, limit_to) if limit_to else hosts


def _refuse_folded_twice(inv: Inventory) -> None:
    """Refuses two hosts whose names differ only in case: DNS folds case, so node01 and
    NODE01 are one machine, which a plan would give two nodes' work."""
    seen: dict[str, Entry] = {}
    for e in inv.entries:
        first = seen.setdefault(e.name.casefold(), e)
        if first is not e:
            raise InventoryError(e.path or inv.source, f"duplicate host: the same name as "
                                 f"{first.name!r} (host names are not case-sensitive)",
                                 e.name, "name", e.line)


__all__ = ["ACCEPTED", "FORMATS", "SELF_LISTED", "Entry", "Inventory", "InventoryError", "load",
           "read"]
