"""Inventory loaders: load(path) returns the hosts to check, or raises InventoryError."""

from __future__ import annotations

from preflight.inventory.errors import InventoryError
from preflight.inventory.yaml_loader import load_yaml
from preflight.model.host import Host

LOADERS = {".yaml": load_yaml, ".yml": load_yaml}


def load(path: str) -> list[Host]:
    """Returns the hosts of the inventory at path, chosen by its extension (YAML by default)."""
    for ext, loader in LOADERS.items():
        if path.endswith(ext):
            return loader(path)
    return load_yaml(path)


__all__ = ["InventoryError", "load"]
