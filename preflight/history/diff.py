"""What changed between two reports or baselines: verdict, hosts, facts, findings, links,
the all-reduce and the plan. Readings that change every run (load, free memory, clocks,
timings) are left out; measurements count as changed only past a tolerance."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from preflight.report.summary import link_matrix
from preflight.report.units import rate

DEFAULT_TOLERANCE = 0.2
# Facts that differ between any two runs of a healthy host: not news.
VOLATILE = re.compile(r"^(cpu\.(utilization|loadavg)|memory\.available_bytes|shm\.free_bytes"
                      r"|clock\..*|probe_elapsed_s|gpu\.devices\[[^]]*\]\.(processes"
                      r"|clock_event_reasons))$")
# Lists of objects compared by a key rather than by position.
KEYS = {"network.interfaces": "name", "gpu.devices": "index", "files.files": "path"}


@dataclass(frozen=True)
class Change:
    """One difference; subject is the host, link or part it is about."""

    kind: str  # verdict, host, fact, finding, link, allreduce, plan
    subject: str
    text: str


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Returns {dotted.path: scalar or list of scalars} of a JSON value."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if set(value) == {"error"} and prefix:
            return {prefix: f"error: {value['error']}"}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        key = KEYS.get(prefix)
        for i, item in enumerate(value):
            name = item.get(key, i) if key else i
            out.update(flatten(item, f"{prefix}[{name}]"))
    else:
        out[prefix] = value
    return out


def _shown(v: Any) -> str:
    return "absent" if v is None else str(v)


def _fact_change(path: str, a: Any, b: Any) -> str:
    if isinstance(a, list) and isinstance(b, list):
        sa, sb = set(map(str, a)), set(map(str, b))
        parts = ([f"+{x}" for x in sorted(sb - sa)] + [f"-{x}" for x in sorted(sa - sb)])
        if parts:
            return f"{path}: {' '.join(parts)}"
    return f"{path}: {_shown(a)} -> {_shown(b)}"


def _hosts(a: Mapping[str, Any], b: Mapping[str, Any]) -> Iterator[Change]:
    ha, hb = a.get("hosts") or {}, b.get("hosts") or {}
    for h in ha:
        if h not in hb:
            yield Change("host", h, f"{h}: only in the first ({ha[h].get('address')})")
    for h in hb:
        if h not in ha:
            yield Change("host", h, f"{h}: only in the second ({hb[h].get('address')})")
    for h in (h for h in ha if h in hb):
        x, y = ha[h], hb[h]
        if x.get("address") != y.get("address"):
            yield Change("host", h, f"{h}: address {x.get('address')} -> {y.get('address')}")
        if x.get("status") != y.get("status"):
            why = (y.get("failure") or {}).get("reason") or ""
            yield Change("host", h, f"{h}: {x.get('status')} -> {y.get('status')}"
                         + (f" ({why})" if why else ""))
        fa, fb = flatten(x.get("facts") or {}), flatten(y.get("facts") or {})
        if not fa or not fb:
            continue  # a host that was not checked in one of them: said above
        for path in sorted(set(fa) | set(fb)):
            if VOLATILE.match(path) or fa.get(path) == fb.get(path):
                continue
            yield Change("fact", h, f"{h}: {_fact_change(path, fa.get(path), fb.get(path))}")


def _findings(a: Mapping[str, Any], b: Mapping[str, Any]) -> Iterator[Change]:
    def keyed(doc: Mapping[str, Any]) -> dict[tuple[str, str, tuple[str, ...]], str]:
        return {(str(f.get("check")), str(f.get("status")), tuple(f.get("hosts") or ())):
                str(f.get("message")) for f in doc.get("findings") or []
                if f.get("status") != "pass"}
    ka, kb = keyed(a), keyed(b)
    for k, msg in kb.items():
        if k not in ka:
            yield Change("finding", ", ".join(k[2]) or "cluster", f"new {k[1]}: [{k[0]}] {msg}")
    for k, msg in ka.items():
        if k not in kb:
            yield Change("finding", ", ".join(k[2]) or "cluster", f"gone {k[1]}: [{k[0]}] {msg}")


def _links(a: Mapping[str, Any], b: Mapping[str, Any], tol: float) -> Iterator[Change]:
    _, la = link_matrix(a)
    _, lb = link_matrix(b)
    for pair in sorted(set(la) & set(lb)):
        x, y = la[pair], lb[pair]
        if x > 0 and abs(y - x) / x > tol:
            yield Change("link", f"{pair[0]} -> {pair[1]}", f"{pair[0]} -> {pair[1]}: "
                         f"{rate(x)} -> {rate(y)} ({(y - x) / x:+.0%})")
    ara = ((a.get("network") or {}).get("allreduce") or {}).get("sizes") or []
    arb = ((b.get("network") or {}).get("allreduce") or {}).get("sizes") or []
    before = {s["bytes"]: s["busbw_bytes_s"] for s in ara}
    for s in arb:
        x, y = before.get(s["bytes"]) or 0.0, float(s["busbw_bytes_s"])
        if x and abs(y - x) / x > tol:
            yield Change("allreduce", f"{s['bytes'] >> 20} MiB", f"all-reduce {s['bytes'] >> 20}"
                         f" MiB busbw {x / 1e9:.3g} -> {y / 1e9:.3g} GB/s ({(y - x) / x:+.0%})")


def _plan(a: Mapping[str, Any], b: Mapping[str, Any]) -> Iterator[Change]:
    pa, pb = a.get("plan") or {}, b.get("plan") or {}
    if not pa or not pb:
        return
    for kind in ("workers", "servers"):
        ea = [e.get("endpoint") for e in pa.get(kind) or []]
        eb = [e.get("endpoint") for e in pb.get(kind) or []]
        if ea != eb:
            yield Change("plan", kind, f"plan {kind}: {', '.join(ea) or 'none'} -> "
                         f"{', '.join(eb) or 'none'}")
    xa, xb = set(pa.get("excluded") or {}), set(pb.get("excluded") or {})
    for h in sorted(xb - xa):
        yield Change("plan", h, f"plan: {h} now left out: {'; '.join(pb['excluded'][h])}")
    for h in sorted(xa - xb):
        yield Change("plan", h, f"plan: {h} no longer left out")


def compare(a: Mapping[str, Any], b: Mapping[str, Any], tolerance: float = DEFAULT_TOLERANCE,
            ) -> list[Change]:
    """Returns every change from report a to report b (empty: nothing that matters)."""
    out: list[Change] = []
    if a.get("verdict") != b.get("verdict"):
        out.append(Change("verdict", "cluster", f"verdict {a.get('verdict')} -> "
                          f"{b.get('verdict')}"))
    out += _hosts(a, b)
    out += _findings(a, b)
    out += _links(a, b, tolerance)
    out += _plan(a, b)
    return out
