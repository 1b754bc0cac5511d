"""How quantities and host lists are written, the same in findings, terminal and reports."""

from __future__ import annotations

from collections.abc import Sequence


def rate(bps: float) -> str:
    """Returns '941 Mbit/s' or '9.41 Gbit/s' for bits per second."""
    return f"{bps / 1e9:.3g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.3g} Mbit/s"


def gbytes(bytes_per_s: float) -> str:
    """Returns '1.23 GB/s' for bytes per second (nccl-tests' unit for busbw)."""
    return f"{bytes_per_s / 1e9:.3g} GB/s"


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
