"""Golden probe fixtures in pyinfra's shape: tests/fixtures/facts/<section>/<case>.json holds one
section of a real probe's output and the fact parsed from it; tests/fixtures/facts/probe/
<case>.json says where the case was captured and holds the document's own fields, so a case's
sections put back together are the probe's whole output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from preflight.collect.parse import parse_section
from preflight.report.jsonreport import jsonable

FACTS = Path(__file__).parent / "fixtures" / "facts"
ENVELOPE = "probe"  # not a section: the case's origin and the document's own fields


def section_fixtures() -> list[Path]:
    """Returns every section fixture, section by section."""
    return sorted(p for p in FACTS.glob("*/*.json") if p.parent.name != ENVELOPE)


def cases() -> list[str]:
    return sorted(p.stem for p in (FACTS / ENVELOPE).glob("*.json"))


def probe_output(case: str) -> str:
    """Returns the whole output the probe printed for a case, put back together."""
    doc = dict(json.loads((FACTS / ENVELOPE / f"{case}.json").read_text())["document"])
    for path in FACTS.glob(f"*/{case}.json"):
        if path.parent.name != ENVELOPE:
            doc[path.parent.name] = json.loads(path.read_text())["output"]
    return json.dumps(doc, sort_keys=True)


def write_case(case: str, origin: dict[str, Any], output: str) -> None:
    """Writes one captured probe output as its section fixtures and its envelope."""
    doc = json.loads(output)
    sections = {k: v for k, v in doc.items() if isinstance(v, dict)}
    for section, raw in sections.items():
        fact = jsonable(parse_section(section, raw))
        _write(FACTS / section / f"{case}.json", {**origin, "output": raw, "fact": fact})
    rest = {k: v for k, v in doc.items() if k not in sections}
    _write(FACTS / ENVELOPE / f"{case}.json", {**origin, "document": rest})


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


# What NVML and nvidia-smi both report of a GPU (tests/fixtures/capture_gpu.py's captures).
# Health counters that do not move between two reads a second apart are compared too (clock
# event reasons and processes may).
SMI_SHARED = ("name", "uuid", "memory_total_mib", "compute_capability", "vbios", "ecc_mode",
              "mig_mode", "persistence_mode", "power_limit_w", "pcie_width", "pcie_width_max",
              "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
              "remapped_rows_failure")


def gpu_sources_agree(doc: dict[str, Any]) -> tuple[Any, Any]:
    """Parses a GPU capture's NVML and nvidia-smi sections and asserts that they read the
    same GPUs alike; returns both GpuFacts."""
    from preflight.collect.parse import gpu
    nvml, smi = gpu(doc["nvml"]), gpu(doc["smi"])
    assert (nvml.source, smi.source) == ("nvml", "nvidia-smi")
    assert nvml.driver == smi.driver and len(nvml.devices) == len(smi.devices) > 0
    for a, b in zip(nvml.devices, smi.devices):
        for field in SMI_SHARED:
            assert getattr(a, field) == getattr(b, field), (a.index, field)
    return nvml, smi
