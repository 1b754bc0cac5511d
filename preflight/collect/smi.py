"""Parses `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` into GpuFacts."""

from __future__ import annotations

import csv
import io
from typing import Optional

from preflight.model.facts import GpuDevice, GpuFacts
from preflight.model.gpumode import mode

MISSING = {"", "[n/a]", "n/a", "[not supported]", "[unknown error]", "[insufficient permissions]"}


class SmiParseError(ValueError):
    pass


def _val(row: dict[str, str], key: str) -> Optional[str]:
    v = row.get(key)
    if v is None or v.strip().lower() in MISSING:
        return None
    return v.strip()


def _int(row: dict[str, str], key: str) -> Optional[int]:
    v = _val(row, key)
    if v is None:
        return None
    try:
        return int(float(v))
    except ValueError:
        raise SmiParseError(f"{key}: not a number: {v[:40]!r}") from None


def _float(row: dict[str, str], key: str) -> Optional[float]:
    v = _val(row, key)
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        raise SmiParseError(f"{key}: not a number: {v[:40]!r}") from None


def parse_smi_csv(fields: str, text: str) -> GpuFacts:
    """Returns the GPUs nvidia-smi listed; a malformed line raises SmiParseError."""
    names = [n.strip() for n in fields.split(",")]
    devices = []
    drivers = set()
    for line_no, cells in enumerate(csv.reader(io.StringIO(text)), 1):
        if not cells or not "".join(cells).strip():
            continue
        if len(cells) != len(names):
            raise SmiParseError(f"line {line_no}: {len(cells)} columns, expected {len(names)}: "
                                f"{','.join(cells)[:80]!r}")
        row = dict(zip(names, (c.strip() for c in cells)))
        index = _int(row, "index")
        name = _val(row, "name")
        if index is None or name is None:
            raise SmiParseError(f"line {line_no}: no GPU index or name")
        driver = _val(row, "driver_version")
        if driver:
            drivers.add(driver)
        devices.append(GpuDevice(
            index=index, name=name, uuid=_val(row, "uuid") or "",
            memory_total_mib=_int(row, "memory.total"),
            compute_capability=_val(row, "compute_cap"),
            vbios=_val(row, "vbios_version"),
            ecc_mode=mode(_val(row, "ecc.mode.current")),
            mig_mode=mode(_val(row, "mig.mode.current")),
            persistence_mode=mode(_val(row, "persistence_mode")),
            power_limit_w=_float(row, "power.limit"),
            pcie_width=_int(row, "pcie.link.width.current"),
            pcie_width_max=_int(row, "pcie.link.width.max")))
    if len(drivers) > 1:
        raise SmiParseError(f"GPUs of one host report different drivers: {sorted(drivers)}")
    return GpuFacts(source="nvidia-smi", driver=drivers.pop() if drivers else None,
                    devices=tuple(devices))
