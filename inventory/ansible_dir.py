"""`-i inventory/`: an Ansible inventory directory, its files merged into one inventory with
the directory's group_vars/ and host_vars/ (ansible_tree.py says which files, and in what
order)."""

from __future__ import annotations

import os

import preflight.inventory.ansible as ansible
from preflight.config.errors import read_input
from preflight.config.yamlfile import parse as parse_yaml
from preflight.inventory.ansible_tree import inventory_files, vars_dirs
from preflight.inventory.entry import Inventory
from preflight.inventory.errors import InventoryError

EXPORT = "ansible-inventory -i DIR --list --yaml > hosts.yml, then -i hosts.yml"


def _read_into(p: ansible.Parsed, path: str) -> str:
    """Reads one file of the directory into p; returns its format ("" when it is empty)."""
    text = read_input(path, InventoryError)
    if text.startswith("#!") and os.access(path, os.X_OK):
        raise InventoryError(path, f"an inventory script is not run by preflight (write its "
                             f"hosts out: {EXPORT})")
    if not text.strip():
        return ""
    if ansible.has_sections(text):
        ansible.parse_ini(path, text, p)
        return "ansible-ini"
    try:
        doc = parse_yaml(path, text, InventoryError)
    except InventoryError:
        doc = None
    if isinstance(doc, dict):
        if "plugin" in doc:
            raise InventoryError(path, f"an inventory plugin's config (plugin: "
                                 f"{doc['plugin']}) is not run by preflight (write its hosts "
                                 f"out: {EXPORT})")
        ansible.parse_yaml(path, doc, p)
        return "ansible-yaml"
    # Host lines without a section: Ansible's INI plugin puts them in "ungrouped".
    ansible.parse_ini(path, text, p)
    return "ansible-ini"


def load(root: str) -> Inventory:
    """The hosts of every inventory file under root, with root's group_vars/ and
    host_vars/."""
    p = ansible.Parsed(root)
    formats = {_read_into(p, f) for f in inventory_files(root)} - {""}
    fmt = formats.pop() if len(formats) == 1 else "ansible-ini"
    return ansible.to_inventory(p, fmt, vars_dirs(root))
