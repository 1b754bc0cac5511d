"""Hosts named on the command line (`-i 'node[01-16]'`, `-i a,b,c`) or by the current Slurm
allocation ($SLURM_JOB_NODELIST): Slurm's hostlist syntax, expanded by python-hostlist."""

from __future__ import annotations

import os

import hostlist

from preflight.inventory import validate as V
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError

SLURM_VAR = "SLURM_JOB_NODELIST"


def load(expression: str, source: str, fmt: str = "list") -> Inventory:
    try:
        names = list(hostlist.expand_hostlist(V.bounded_hostlist(expression.strip().strip(","))))
    except V.BadValue as e:
        raise InventoryError(source, str(e)) from None
    except hostlist.BadHostlist as e:
        raise InventoryError(source, f"bad host list {expression!r}: {e}") from None
    if not names:
        raise InventoryError(source, "no hosts in the list")
    seen: set[str] = set()
    entries = []
    for name in names:
        try:
            V.host_name(name)
        except V.BadValue as e:
            raise InventoryError(source, str(e), name, "name") from None
        if name in seen:
            raise InventoryError(source, "duplicate host", name, "name")
        seen.add(name)
        entries.append(Entry(name=name, path=source))
    return Inventory(tuple(entries), source, None, fmt)


def from_slurm() -> Inventory:
    """The nodes of the allocation this runs in."""
    nodelist = os.environ.get(SLURM_VAR, "").strip()
    if not nodelist:
        raise InventoryError(f"${SLURM_VAR}", "not set: preflight is not running inside a "
                             "Slurm allocation (salloc, sbatch) — name the hosts with -i")
    return load(nodelist, f"${SLURM_VAR}", "slurm")
