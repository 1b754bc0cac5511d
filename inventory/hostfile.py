"""A plain hostfile: one host per line, as MPI and Paddle hostfiles write them — `node01`,
`node01 slots=8` (Open MPI; max_slots too), or `node01:8` (MPICH, Intel MPI). `#` starts a
comment. Slots are kept as each host's ranks for the plan."""

from __future__ import annotations

import re

from preflight.inventory import validate as V
from preflight.inventory.entry import Entry, Inventory
from preflight.inventory.errors import InventoryError

# Ranks one host can run: more is a typo (slots=80 for 8), not a host.
SLOTS_MAX = 4096
_LINE = re.compile(r"^(?P<host>[^\s:=]+)(?::(?P<colon>\d+))?"
                   r"(?P<opts>(?:\s+(?:slots|max_slots|max-slots)=\d+)*)\s*$")


# What only a hostfile writes: a slots option, or host:N.
_HOSTFILE_MARK = re.compile(r"^[^\s:=#]+(?::\d+\s*$|\s+(?:max[_-])?slots\b)", re.MULTILINE)
_ANSIBLE_MARK = re.compile(r"\b(?:ansible|preflight)_\w+=")


def meant(text: str) -> bool:
    """True when text is a hostfile with a mistake in it: a line with slots (or host:N) and
    no Ansible or preflight variable anywhere; the hostfile reader then names the bad line,
    instead of the Ansible one reading it as a host with variables it ignores."""
    body = "\n".join(ln.split("#", 1)[0] for ln in text.splitlines())
    return bool(_HOSTFILE_MARK.search(body)) and not _ANSIBLE_MARK.search(body)


def looks_like(text: str) -> bool:
    """True when every line that is not blank or a comment reads as a hostfile line."""
    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    return bool(lines) and all(_LINE.match(ln) for ln in lines)


def load(path: str, text: str) -> Inventory:
    entries: list[Entry] = []
    seen: set[str] = set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if not m:
            raise InventoryError(path, f"expected 'host', 'host slots=N' or 'host:N', got "
                                 f"{line[:80]!r}", line=n)
        host = m.group("host")
        try:
            V.host_name(host)
        except V.BadValue as e:
            raise InventoryError(path, str(e), host, "name", n) from None
        if host in seen:
            raise InventoryError(path, "duplicate host", host, "name", n)
        if len(seen) >= V.MAX_HOSTS:
            raise InventoryError(path, f"lists more than the {V.MAX_HOSTS:,} hosts preflight "
                                 "accepts", host, "name", n)
        seen.add(host)
        slots = m.group("colon") or next(
            (o.split("=")[1] for o in m.group("opts").split() if o.startswith("slots=")), None)
        if slots is not None and not 1 <= int(slots) <= SLOTS_MAX:
            raise InventoryError(path, f"slots must be from 1 to {SLOTS_MAX:,} (ranks on one "
                                 "host)", host, "slots", n)
        entries.append(Entry(name=host, slots=int(slots) if slots else None,
                             path=path, line=n))
    if not entries:
        raise InventoryError(path, "the hostfile lists no hosts")
    return Inventory(tuple(entries), path, None, "hostfile")
