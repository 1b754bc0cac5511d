"""What the human-facing reports show of a JSON report: key facts per host, link figures.

Every renderer (JUnit, Markdown, HTML) reads the JSON document, never the live run, so a
saved report renders the same later. A section the probe could not read is {"error": ...}
in the document and shows as "error: ..." here; a field of another shape shows as "?"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

# Rows that differ from host to host by nature: never highlighted as a difference.
UNIQUE_ROWS = frozenset({"address", "hostname", "probe time"})
STATUS_ORDER = ("error", "fail", "could-not-check", "warn", "pass", "skip")
STATUS_WORDS = {"error": "check error", "fail": "fail", "could-not-check": "could not check",
                "warn": "warn", "pass": "pass", "skip": "n/a"}
QUIET = ("pass", "skip")  # statuses shown folded, after what needs a look


def as_list(v: Any) -> list[Any]:
    """v if it is a list, else empty: a saved report's facts are read, never trusted."""
    return v if isinstance(v, list) else []


def _sec(facts: Mapping[str, Any], name: str) -> Optional[Mapping[str, Any]]:
    v = facts.get(name)
    return v if isinstance(v, dict) else None


def _err(facts: Mapping[str, Any], name: str) -> Optional[str]:
    sec = _sec(facts, name)
    if sec is None:
        return "missing"
    err = sec.get("error")
    return f"error: {err}" if isinstance(err, str) and len(sec) == 1 else None


def _gib(n: Any) -> str:
    return f"{n / (1 << 30):.1f} GiB" if isinstance(n, (int, float)) else "?"


def _gpus(g: Mapping[str, Any]) -> str:
    devs = g.get("devices")
    if not isinstance(devs, list) or not devs:
        return "none"
    kinds = Counter(f"{d.get('name', '?')} {d.get('memory_total_mib', '?')} MiB "
                    f"cc {d.get('compute_capability', '?')}" for d in devs if isinstance(d, dict))
    return ", ".join(f"{n} x {k}" for k, n in kinds.items())


def waived_checks(doc: Mapping[str, Any]) -> list[str]:
    """The checks the run waived (--skip), as the report records them."""
    return [str(c) for c in doc.get("waived") or [] if isinstance(c, str)]


def job_interface(facts: Mapping[str, Any], address: str) -> Optional[Mapping[str, Any]]:
    """Returns the interface the job uses, read from the JSON document: the twin of
    NetworkFacts.job_interface (reports read the document, never the model's facts)."""
    net = _sec(facts, "network") or {}
    ifaces = [i for i in as_list(net.get("interfaces")) if isinstance(i, dict)]
    for want in (address, net.get("reached_at")):
        for i in ifaces:
            if want and any(str(a).split("/")[0] == want for a in as_list(i.get("addresses"))):
                return i
    route = net.get("default_route")
    return next((i for i in ifaces if route and i.get("name") == route), None)


def key_facts(host: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Returns (label, value) rows: what an operator compares across hosts at a glance."""
    rows = [("address", str(host.get("address", "?")))]
    if host.get("status") != "ok":
        failure = host.get("failure") or {}
        rows.append(("could not check", f"{failure.get('stage', '?')}: "
                                        f"{failure.get('reason', '?')}"))
        return rows
    facts = host.get("facts") or {}
    system = _sec(facts, "system") or {}
    cpu = _sec(facts, "cpu") or {}
    mem = _sec(facts, "memory") or {}
    gpu = _sec(facts, "gpu") or {}
    paddle = _sec(facts, "paddle") or {}
    iface = job_interface(facts, str(host.get("address", "")))
    rows += [
        ("hostname", _err(facts, "system") or str(system.get("hostname", "?"))),
        ("OS", _err(facts, "system") or str(system.get("os", "?"))),
        ("kernel", _err(facts, "system") or str(system.get("kernel", "?"))),
        ("CPU cores (effective)", _err(facts, "cpu")
         or f"{cpu.get('effective', '?')} of {cpu.get('logical', '?')}"),
        ("memory", _err(facts, "memory") or _gib(mem.get("total_bytes"))),
        ("GPUs", _err(facts, "gpu") or _gpus(gpu)),
        ("driver", _err(facts, "gpu") or str(gpu.get("driver") or "none")),
    ]
    if _err(facts, "paddle"):
        rows.append(("paddle", str(_err(facts, "paddle"))))
    elif not paddle.get("available"):
        rows.append(("paddle", f"not importable: {paddle.get('reason', '?')}"))
    else:
        cuda = paddle.get("cuda") if paddle.get("compiled_with_cuda") else "CPU build"
        rows += [("paddle", str(paddle.get("version", "?"))),
                 ("CUDA / cuDNN / NCCL", f"{cuda} / {paddle.get('cudnn') or '-'} / "
                                         f"{paddle.get('nccl') or '-'}"
                  if cuda != "CPU build" else "CPU build")]
    rows.append(("Python (training)", str(paddle.get("python") or "?")))
    rows.append(("job NIC", _err(facts, "network") or (
        "?" if iface is None else f"{iface.get('name')} MTU {iface.get('mtu')}, "
        f"{iface.get('speed_mbps') or '?'} Mbit/s")))
    rows.append(("probe time", f"{host.get('elapsed_s', '?')} s"))
    return rows


def majority(values: Sequence[str]) -> Optional[str]:
    """Returns the value most hosts share, or None when there is no single one."""
    values = [v for v in values if v]
    ranked = Counter(values).most_common(2)
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def sorted_findings(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Returns the findings worst first (the order of the terminal table)."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted((f for f in doc.get("findings") or [] if isinstance(f, dict)),
                  key=lambda f: rank.get(str(f.get("status")), 0))


def link_matrix(doc: Mapping[str, Any]) -> tuple[list[str], dict[tuple[str, str], float]]:
    """Returns (hosts, {(sender, receiver): best bps measured}) from the iperf3 runs."""
    net = doc.get("network") or {}
    hosts = [str(h) for h in net.get("hosts") or []]
    best: dict[tuple[str, str], float] = {}
    for r in net.get("links") or []:
        bps = r.get("received_bps")
        if isinstance(bps, (int, float)):
            key = (str(r.get("sender")), str(r.get("receiver")))
            best[key] = max(best.get(key, 0.0), float(bps))
    return hosts, best


def verdict_text(doc: Mapping[str, Any]) -> str:
    return "GO" if doc.get("verdict") == "go" else "NO-GO"


def host_table(hosts: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, bool]]]]:
    """Returns the hosts side by side: per key-fact label, each host's (value, whether it
    differs from most hosts), hosts in report order."""
    facts = {h: dict(key_facts(info)) for h, info in hosts.items()}
    labels = list(dict.fromkeys(label for rows in facts.values() for label in rows))
    table = []
    for label in labels:
        values = [facts[h].get(label, "") for h in hosts]
        table.append((label, list(zip(values, odd_ones(label, values)))))
    return table


def odd_ones(label: str, values: Sequence[str]) -> list[bool]:
    """Returns, per host, whether its value differs from the majority (the cell an operator
    has to look at); never for rows unique by nature, nor with two hosts (no majority)."""
    common = majority(values) if len(values) > 2 and label not in UNIQUE_ROWS else None
    return [common is not None and bool(v) and v != common for v in values]


def cost_text(nbytes: int, with_s: float, without_s: float, basis: str) -> str:
    """Returns what keeping a left-out host costs, in one phrase: 'with it, 32 MiB all-reduce
    ~22 s vs ~1.1 s without (20x, predicted from the iperf3 links)'."""
    factor = f"{with_s / without_s:.2g}x, " if without_s > 0 else ""
    return (f"with it, {nbytes / (1 << 20):g} MiB all-reduce ~{with_s:.2g} s vs "
            f"~{without_s:.2g} s without ({factor}{basis})")


def cost_of(plan: Mapping[str, Any], host: str) -> Optional[str]:
    """Returns the cost phrase of a left-out host in a report's plan, if it has one."""
    c = (plan.get("costs") or {}).get(host)
    if not isinstance(c, dict):
        return None
    try:
        return cost_text(int(c["bytes"]), float(c["with_s"]), float(c["without_s"]),
                         str(c.get("basis", "")))
    except (KeyError, TypeError, ValueError):
        return None
