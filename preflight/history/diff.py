"""What changed between two reports or baselines: verdict, hosts, facts, findings, links,
the all-reduce and the plan, in what matters to a job. Readings that change every run (load,
free memory and space, clocks, timings, listening ports) are left out; a value that is absent
in one and zero or empty in the other is the same; a finding counts by its check, host and
status, not by the numbers in its message; measurements count as changed only past a
tolerance. So two runs of an unchanged cluster compare equal, and diff can gate on it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Optional

from preflight.common.grouping import what_of
from preflight.common.plain import facts_json
from preflight.common.summary import link_matrix
from preflight.common.units import hostlist, rate
from preflight.model.findings import Status
from preflight.model.report import Report, SizeEntry

DEFAULT_TOLERANCE = 0.2
ENDPOINTS_SHOWN = 8  # a plan's endpoints named in a change; the rest counted
# Facts that differ between any two runs of a healthy host: not news.
# ports.tcp: the ports the job needs are judged by the ports check, whose findings are
# compared; the rest come and go with every SSH session and daemon.
VOLATILE = re.compile(r"^(cpu\.(utilization|loadavg|pressure_avg\d+|other_work\..*)"
                      r"|memory\.available_bytes|(shm|tmp)\.free_bytes|ports\.tcp"
                      r"|clock\..*|probe_elapsed_s|paddle\.import_s"
                      r"|container\.(start_s|shm\.free_bytes)"
                      r"|gpu\.devices\[[^]]*\]\.(processes|clock_event_reasons))$")
# Absent and zero or empty say the same thing (paddle.nccl 0 from one build, absent from
# another), and so does false: nothing to report.
_EMPTY: tuple[Any, ...] = (None, 0, "", "0", (), [], {}, False)
# Lists of objects compared by a key rather than by position.
KEYS = {"network.interfaces": "name", "gpu.devices": "index", "files.files": "path"}


@dataclass(frozen=True)
class Change:
    """One difference. subject is the host, link or part it is about; what is the text
    without the host's name, so the same change on many hosts reads as one line."""

    kind: str  # verdict, host, fact, finding, link, allreduce, plan
    subject: str
    what: str
    host: str = ""  # the one host it is about, if any

    @property
    def text(self) -> str:
        return f"{self.host}: {self.what}" if self.host else self.what

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "host": self.host,
                "text": self.text}


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


def _empty(v: Any) -> bool:
    return any(v is e or (type(v) is type(e) and v == e) for e in _EMPTY)


def same(a: Any, b: Any) -> bool:
    """Whether two fact values say the same (absent, zero, empty and false alike)."""
    return a == b or (_empty(a) and _empty(b))


def _shown(v: Any) -> str:
    return "absent" if v is None else str(v)


def _fact_change(path: str, a: Any, b: Any) -> str:
    if isinstance(a, list) and isinstance(b, list):
        sa, sb = set(map(str, a)), set(map(str, b))
        parts = ([f"+{x}" for x in sorted(sb - sa)] + [f"-{x}" for x in sorted(sa - sb)])
        if parts:
            return f"{path}: {' '.join(parts)}"
    return f"{path}: {_shown(a)} -> {_shown(b)}"


def _hosts(a: Report, b: Report, ignore: Sequence[str]) -> Iterator[Change]:
    ha, hb = a.hosts, b.hosts
    for h in ha:
        if h not in hb:
            yield Change("host", h, f"only in the first ({ha[h].address})", h)
    for h in hb:
        if h not in ha:
            yield Change("host", h, f"only in the second ({hb[h].address})", h)
    for h in (h for h in ha if h in hb):
        x, y = ha[h], hb[h]
        if x.address != y.address:
            yield Change("host", h, f"address {x.address} -> {y.address}", h)
        if x.status != y.status:
            why = (y.failure.reason if y.failure else None) or ""
            yield Change("host", h, f"{x.status} -> {y.status}" + (f" ({why})" if why else ""),
                         h)
        fa, fb = flatten(facts_json(x.facts) or {}), flatten(facts_json(y.facts) or {})
        if not fa or not fb:
            continue  # a host that was not checked in one of them: said above
        for path in sorted(set(fa) | set(fb)):
            if VOLATILE.match(path) or same(fa.get(path), fb.get(path)) or \
                    any(fnmatchcase(path, pat) for pat in ignore):
                continue
            yield Change("fact", h, _fact_change(path, fa.get(path), fb.get(path)), h)


_RANK = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.COULD_NOT_CHECK: 2,
         Status.FAIL: 3}


def _by_host(report: Report) -> dict[tuple[str, str], tuple[Status, str]]:
    """{(check, host or ""): (worst status, its message)} of a report's findings that are not
    passes; a finding about several hosts counts for each of them."""
    out: dict[tuple[str, str], tuple[Status, str]] = {}
    for f in report.findings:
        if _RANK.get(f.status, 1) == 0:
            continue
        for h in f.hosts or ("",):
            key = (f.check, h)
            if key not in out or _RANK.get(f.status, 1) > _RANK.get(out[key][0], 1):
                out[key] = (f.status, what_of([h], f.message) if h else f.message)
    return out


def _findings(a: Report, b: Report) -> Iterator[Change]:
    """A finding is news when its check's status on a host changed; its message's numbers
    (free cores, a link's rate) change every run and are not compared."""
    ka, kb = _by_host(a), _by_host(b)
    for (check, host), (status, msg) in kb.items():
        was = ka.get((check, host))
        if was is None:
            yield Change("finding", host or "cluster", f"new {status.value}: [{check}] {msg}",
                         host)
        elif was[0] != status:
            yield Change("finding", host or "cluster",
                         f"{was[0].value} -> {status.value}: [{check}] {msg}", host)
    for (check, host), (status, msg) in ka.items():
        if (check, host) not in kb:
            yield Change("finding", host or "cluster", f"gone {status.value}: [{check}] {msg}",
                         host)


def _links(a: Report, b: Report, tol: float) -> Iterator[Change]:
    _, la = link_matrix(a)
    _, lb = link_matrix(b)
    for pair in sorted(set(la) & set(lb)):
        x, y = la[pair], lb[pair]
        if x > 0 and abs(y - x) / x > tol:
            yield Change("link", f"{pair[0]} -> {pair[1]}", f"{pair[0]} -> {pair[1]}: "
                         f"{rate(x)} -> {rate(y)} ({(y - x) / x:+.0%})")
    before = {s.bytes: s.busbw_bytes_s for s in _sizes(a)}
    for s in _sizes(b):
        x, y = before.get(s.bytes) or 0.0, s.busbw_bytes_s
        if x and abs(y - x) / x > tol:
            yield Change("allreduce", f"{s.bytes >> 20} MiB", f"all-reduce {s.bytes >> 20}"
                         f" MiB busbw {x / 1e9:.3g} -> {y / 1e9:.3g} GB/s ({(y - x) / x:+.0%})")


def _sizes(report: Report) -> tuple[SizeEntry, ...]:
    net = report.network
    return net.allreduce.sizes if net is not None and net.allreduce is not None else ()


def _plan(a: Report, b: Report) -> Iterator[Change]:
    pa, pb = a.plan, b.plan
    if pa is None or pb is None:
        return
    for kind, ea, eb in (("workers", pa.workers, pb.workers),
                         ("servers", pa.servers, pb.servers)):
        if [e.endpoint for e in ea] != [e.endpoint for e in eb]:
            yield Change("plan", kind, f"plan {kind}: {_endpoints([e.endpoint for e in ea])} "
                                       f"-> {_endpoints([e.endpoint for e in eb])}")
    xa, xb = set(pa.excluded), set(pb.excluded)
    for h in sorted(xb - xa):
        why = "; ".join(what_of([h], r) for r in pb.excluded[h])
        yield Change("plan", h, f"plan: now left out: {why}", h)
    for h in sorted(xa - xb):
        yield Change("plan", h, "plan: no longer left out", h)


def _endpoints(eps: Sequence[str]) -> str:
    if not eps:
        return "none"
    shown = ", ".join(eps[:ENDPOINTS_SHOWN])
    return shown + (f" (+{len(eps) - ENDPOINTS_SHOWN} more)" if len(eps) > ENDPOINTS_SHOWN
                    else "")


def compare(a: Report, b: Report, tolerance: float = DEFAULT_TOLERANCE,
            ignore: Sequence[str] = ()) -> list[Change]:
    """Returns every change from report a to report b that matters (empty: none). ignore:
    more fact paths to leave out, as shell patterns ("gpu.devices[*].vbios")."""
    out: list[Change] = []
    if a.verdict != b.verdict:
        out.append(Change("verdict", "cluster", f"verdict {_verdict(a)} -> {_verdict(b)}"))
    out += _hosts(a, b, ignore)
    out += _findings(a, b)
    out += _links(a, b, tolerance)
    out += _plan(a, b)
    return out


def _verdict(report: Report) -> Optional[str]:
    return report.verdict.value if report.verdict else None


def lines(changes: Sequence[Change], limit: int = 0) -> list[str]:
    """The changes for people: one line per change, the same change on many hosts one line
    with the hosts as a hostlist ("node[01-64]: gpu.driver: 535.104 -> 550.54")."""
    hosts: dict[tuple[str, str], list[str]] = {}
    for ch in changes:
        hosts.setdefault((ch.kind, ch.what), []).append(ch.host)
    out = []
    for (_, what), names in hosts.items():
        named = [h for h in names if h]
        out.append(f"{hostlist(named, limit)}: {what}" if named else what)
    return out


def document(changes: Sequence[Change], first: str, second: str) -> dict[str, Any]:
    """The JSON of diff --json: every change, one per host."""
    return {"first": first, "second": second, "differs": bool(changes),
            "count": len(changes), "changes": [ch.as_dict() for ch in changes]}
