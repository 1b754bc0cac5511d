"""Parses `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` into GpuFacts, health
included, in the terms NVML's facts use (a GPU reads alike through either source), and
`--query-compute-apps=gpu_uuid` into each GPU's count of compute processes."""

from __future__ import annotations

import csv
import io
from typing import Optional

from preflight.common.gpumode import mode
from preflight.model.facts import GpuDevice, GpuFacts

# What nvidia-smi prints where it has no value: not reported, never zero or "No".
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


def _yes(row: dict[str, str], key: str) -> Optional[bool]:
    """nvidia-smi's Yes/No (or 1/0) as a bool; None where not reported."""
    v = _val(row, key)
    if v is None:
        return None
    word = v.lower()
    if word in ("yes", "true", "1"):
        return True
    if word in ("no", "false", "0"):
        return False
    raise SmiParseError(f"{key}: not Yes or No: {v[:40]!r}")


def _mask(row: dict[str, str]) -> Optional[int]:
    """The active clock event (throttle) reasons, a hexadecimal bitmask, under either of
    its names (clocks_throttle_reasons before r535): NVML's bits."""
    for key in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        v = _val(row, key)
        if v is not None:
            try:
                return int(v, 16)
            except ValueError:
                raise SmiParseError(f"{key}: not a bitmask: {v[:40]!r}") from None
    return None


def _apps(text: Optional[str]) -> Optional[dict[str, int]]:
    """{GPU UUID: compute processes} from `--query-compute-apps=gpu_uuid`; None: not read."""
    if text is None:
        return None
    counts: dict[str, int] = {}
    for line in text.splitlines():
        uuid = line.strip()
        if uuid.startswith("GPU-"):
            counts[uuid] = counts.get(uuid, 0) + 1
    return counts


def parse_smi_csv(fields: str, text: str, apps: Optional[str] = None) -> GpuFacts:
    """Returns the GPUs nvidia-smi listed; a malformed line raises SmiParseError. apps is
    what `--query-compute-apps=gpu_uuid` printed (None: not asked or it failed)."""
    busy = _apps(apps)
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
            pcie_width_max=_int(row, "pcie.link.width.max"),
            ecc_uncorrected_volatile=_int(row, "ecc.errors.uncorrected.volatile.total"),
            retired_pages_pending=_yes(row, "retired_pages.pending"),
            remapped_rows_pending=_yes(row, "remapped_rows.pending"),
            remapped_rows_failure=_yes(row, "remapped_rows.failure"),
            clock_event_reasons=_mask(row),
            processes=None if busy is None else busy.get(_val(row, "uuid") or "", 0)))
    if len(drivers) > 1:
        raise SmiParseError(f"GPUs of one host report different drivers: {sorted(drivers)}")
    return GpuFacts(source="nvidia-smi", driver=drivers.pop() if drivers else None,
                    devices=tuple(devices))
