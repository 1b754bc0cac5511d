"""--limit: the hosts of an inventory to check, chosen as Ansible's --limit chooses them.
Items are separated by commas (outside brackets): a host name, a group, a wildcard
(`node0*`), a Slurm-style range (`node[01-04]`); `!item` leaves hosts out, `&item` keeps only
hosts also in it. An item that matches nothing is an error: a typo must not shrink a gate."""

from __future__ import annotations

import re
from collections.abc import Sequence

import hostlist

from preflight.config.errors import UsageError
from preflight.inventory import validate as V
from preflight.model.host import Host


def split_items(pattern: str) -> list[str]:
    """Splits on commas that are not inside [...]."""
    items, depth, cur = [], 0, ""
    for c in pattern:
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += c
    items.append(cur)
    return [i.strip() for i in items if i.strip()]


def _matcher(item: str) -> set[str] | re.Pattern[str]:
    if "*" in item or "?" in item:
        return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                                  for c in item))
    if "[" in item:
        try:
            return set(hostlist.expand_hostlist(V.bounded_hostlist(item)))
        except V.BadValue as e:
            raise UsageError(f"--limit: {e}") from None
        except hostlist.BadHostlist as e:
            raise UsageError(f"--limit: bad range {item!r}: {e}") from None
    return {item}


def _selected(item: str, hosts: Sequence[Host]) -> list[str]:
    m = _matcher(item)
    out = []
    for h in hosts:
        if isinstance(m, set):
            hit = h.name in m or bool(m & set(h.groups))
        else:
            hit = bool(m.fullmatch(h.name)) or any(m.fullmatch(g) for g in h.groups)
        if hit:
            out.append(h.name)
    return out


def apply(hosts: Sequence[Host], pattern: str) -> list[Host]:
    """Returns the hosts the pattern chooses, in inventory order; raises UsageError."""
    items = split_items(pattern)
    if not items:
        raise UsageError("--limit: empty pattern")
    chosen: set[str] = set()
    positive = [i for i in items if i[0] not in "!&"]
    for item in positive:
        names = _selected(item, hosts)
        if not names:
            raise UsageError(f"--limit: {item!r} matches no host or group of the inventory")
        chosen.update(names)
    if not positive:
        chosen = {h.name for h in hosts}
    for item in items:
        if item[0] in "!&":
            names = _selected(item[1:], hosts)
            if not names:
                raise UsageError(f"--limit: {item[1:]!r} matches no host or group of the "
                                 "inventory")
            chosen = chosen - set(names) if item[0] == "!" else chosen & set(names)
    out = [h for h in hosts if h.name in chosen]
    if not out:
        raise UsageError(f"--limit {pattern!r} leaves no host to check")
    return out
