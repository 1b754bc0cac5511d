"""How quantities and host lists are written, the same in findings, terminal and reports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any


def rate(bps: float) -> str:
    """Returns '941 Mbit/s' or '9.41 Gbit/s' for bits per second."""
    return f"{bps / 1e9:.3g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.3g} Mbit/s"


def gbytes(bytes_per_s: float) -> str:
    """Returns '1.23 GB/s' for bytes per second (nccl-tests' unit for busbw)."""
    return f"{bytes_per_s / 1e9:.3g} GB/s"


def mbytes(bytes_per_s: float) -> str:
    """Returns '41.9 MB/s' for bytes per second (a rank's writes to storage)."""
    return f"{bytes_per_s / 1e6:.3g} MB/s"


def hosts_text(hosts: Sequence[str], limit: int = 6) -> str:
    """Returns 'a, b, c' or 'a, b, c, ... (+5 more)' for long lists."""
    if len(hosts) <= limit:
        return ", ".join(hosts)
    return ", ".join(hosts[:limit]) + f", ... (+{len(hosts) - limit} more)"


def port_ranges(ports: tuple[int, ...]) -> str:
    """Returns '6070-6077, 6767' for a sorted tuple of ports."""
    out: list[str] = []
    for p in ports:
        if out and out[-1].split("-")[-1] == str(p - 1):
            out[-1] = out[-1].split("-")[0] + f"-{p}"
        else:
            out.append(str(p))
    return ", ".join(out)


_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")


def _ranges(nums: list[int], width: int) -> list[str]:
    out: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        a, b = str(start).zfill(width), str(prev).zfill(width)
        out.append(a if start == prev else f"{a}-{b}")
        if n is not None:
            start = prev = n
    return out


def _families(hosts: Sequence[str]) -> list[tuple[str, list[str], str]]:
    """Returns (prefix, ranges, suffix) per family of numbered names, in the order the
    families first appear; a name with no number is a family of itself (ranges empty)."""
    families: dict[tuple[str, str], dict[int, list[int]]] = {}
    order: list[Any] = []
    for h in dict.fromkeys(hosts):
        m = _NUMBERED.match(h)
        if not m:
            order.append(h)
            continue
        prefix, digits, suffix = m.groups()
        # Zero-padded numbers keep their width; unpadded ones join the padded family of
        # their length (gpu099, gpu100) or the unpadded one (node9, node10).
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        if (prefix, suffix) not in families:
            families[(prefix, suffix)] = {}
            order.append((prefix, suffix))
        families[(prefix, suffix)].setdefault(width, []).append(int(digits))
    out: list[tuple[str, list[str], str]] = []
    for item in order:
        if isinstance(item, str):
            out.append((item, [], ""))
            continue
        widths = families[item]
        for w in [w for w in widths if w]:  # padded widths first take their own lengths
            same = [n for n in widths.get(0, []) if len(str(n)) == w]
            widths[w] += same
            widths[0] = [n for n in widths.get(0, []) if len(str(n)) != w]
        for w, nums in widths.items():
            if nums:
                out.append((item[0], _ranges(sorted(set(nums)), w), item[1]))
    return out


def _family_text(prefix: str, ranges: list[str], suffix: str, cut: bool = False) -> str:
    if not ranges:
        return prefix
    if len(ranges) == 1 and "-" not in ranges[0] and not cut:
        return f"{prefix}{ranges[0]}{suffix}"
    return f"{prefix}[{','.join(ranges)}{',...' if cut else ''}]{suffix}"


def hostlist(hosts: Sequence[str], limit: int = 0) -> str:
    """Returns hosts compressed as Slurm writes them ('gpu[001-500],login1'), families in
    the order they first appear; with limit, cut to about limit characters, whole ranges
    only, and counted: 'gpu[001-200,202,...],... (612 hosts)'."""
    fams = _families(hosts)
    text = ",".join(_family_text(*f) for f in fams)
    if not limit or len(text) <= limit:
        return text
    count = f" ({len(dict.fromkeys(hosts))} hosts)"
    room = max(8, limit - len(count) - 5)
    parts: list[str] = []
    used = 0
    for prefix, ranges, suffix in fams:
        whole = _family_text(prefix, ranges, suffix)
        if used + len(whole) + 1 <= room:
            parts.append(whole)
            used += len(whole) + 1
            continue
        taken: list[str] = []
        for r in ranges:  # as many of this family's ranges as fit
            if used + len(_family_text(prefix, [*taken, r], suffix, True)) + 1 > room:
                break
            taken.append(r)
        if taken or not parts:
            parts.append(_family_text(prefix, taken or ranges[:1], suffix, True)
                         if ranges else prefix)
        break
    return ",".join(parts) + ",..." * (not parts[-1].endswith("]")) + count
