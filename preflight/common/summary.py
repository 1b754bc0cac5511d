"""What the human-facing reports show of a JSON report: key facts per host, link figures.

Every renderer (JUnit, Markdown, HTML) reads the report as decoded from its JSON document
(model/report.py), never the live run, so a saved report renders the same later. A section
the probe could not read shows as "error: ..." here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Optional

from preflight.model.facts import (
    ContainerFacts,
    CpuFacts,
    GpuFacts,
    MemoryFacts,
    NetworkFacts,
    PaddleFacts,
    SectionError,
    SystemFacts,
)
from preflight.model.findings import Finding, Verdict
from preflight.model.report import FailureEntry, HostEntry, PlanEntry, Report

# Rows that differ from host to host by nature: never highlighted as a difference.
UNIQUE_ROWS = frozenset({"address", "hostname", "probe time"})
STATUS_ORDER = ("error", "fail", "could-not-check", "warn", "pass", "skip")
STATUS_WORDS = {"error": "check error", "fail": "fail", "could-not-check": "could not check",
                "warn": "warn", "pass": "pass", "skip": "n/a"}
QUIET = ("pass", "skip")  # statuses shown folded, after what needs a look


def _err(section: object) -> Optional[str]:
    """'error: ...' for a section the probe could not read, else None."""
    return f"error: {section.message}" if isinstance(section, SectionError) else None


def _gib(n: Optional[float]) -> str:
    return "?" if n is None else f"{n / (1 << 30):.1f} GiB"


def _gpus(g: GpuFacts) -> str:
    if not g.devices:
        return "none"
    kinds = Counter(f"{d.name} {d.memory_total_mib if d.memory_total_mib is not None else '?'}"
                    f" MiB cc {d.compute_capability or '?'}" for d in g.devices)
    return ", ".join(f"{n} x {k}" for k, n in kinds.items())


def key_facts(host: HostEntry) -> list[tuple[str, str]]:
    """Returns (label, value) rows: what an operator compares across hosts at a glance."""
    address = ("address", host.address or "?")
    facts = host.facts
    if not host.ok or facts is None:
        failure = host.failure or FailureEntry()
        return [address, ("could not check", f"{failure.stage or '?'}: {failure.reason or '?'}")]
    rows: list[tuple[str, Optional[str]]] = [address]
    system, cpu, mem, gpu, paddle = (facts.system, facts.cpu, facts.memory, facts.gpu,
                                     facts.paddle)
    net = facts.network
    iface = net.job_interface(host.address or "") if isinstance(net, NetworkFacts) else None
    rows += [
        ("hostname", system.hostname if isinstance(system, SystemFacts) else _err(system)),
        ("OS", system.os if isinstance(system, SystemFacts) else _err(system)),
        ("kernel", system.kernel if isinstance(system, SystemFacts) else _err(system)),
        ("CPU cores (effective)", f"{cpu.effective} of {cpu.logical}"
         if isinstance(cpu, CpuFacts) else _err(cpu)),
        ("memory", _gib(mem.total_bytes) if isinstance(mem, MemoryFacts) else _err(mem)),
        ("GPUs", _gpus(gpu) if isinstance(gpu, GpuFacts) else _err(gpu)),
        ("driver", (gpu.driver or "none") if isinstance(gpu, GpuFacts) else _err(gpu)),
    ]
    if not isinstance(paddle, PaddleFacts):
        rows.append(("paddle", _err(paddle)))
    elif not paddle.available:
        rows.append(("paddle", f"not importable: {paddle.reason or '?'}"))
    else:
        rows += [("paddle", paddle.version or "?"),
                 ("CUDA / cuDNN / NCCL", f"{paddle.cuda} / {paddle.cudnn or '-'} / "
                                         f"{paddle.nccl or '-'}"
                  if paddle.compiled_with_cuda else "CPU build")]
    box = facts.container
    if box is not None:  # the job's container: its Paddle is the one above
        rows.append(("container", _err(box) if not isinstance(box, ContainerFacts) else
                     f"{box.runtime} missing on this host" if box.no_runtime else
                     f"{box.subject}: not on this host" if box.missing else
                     f"{box.subject}: did not start" if box.error else
                     f"{box.subject} {(box.image_id or '?')[:19]}"))
    rows.append(("Python (training)", (paddle.python if isinstance(paddle, PaddleFacts)
                                       else None) or "?"))
    rows.append(("job NIC", _err(net) or (
        "?" if iface is None else f"{iface.name} MTU {iface.mtu}, "
        f"{iface.speed_mbps or '?'} Mbit/s")))
    rows.append(("probe time", f"{'?' if host.elapsed_s is None else host.elapsed_s} s"))
    return [(label, value or "?") for label, value in rows]


def majority(values: Sequence[str]) -> Optional[str]:
    """Returns the value most hosts share, or None when there is no single one."""
    values = [v for v in values if v]
    ranked = Counter(values).most_common(2)
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def sorted_findings(report: Report) -> list[Finding]:
    """Returns the findings worst first (the order of the terminal table)."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(report.findings, key=lambda f: rank.get(f.status.value, 0))


def link_matrix(report: Report) -> tuple[list[str], dict[tuple[str, str], float]]:
    """Returns (hosts, {(sender, receiver): best bps measured}) from the iperf3 runs."""
    net = report.network
    if net is None:
        return [], {}
    best: dict[tuple[str, str], float] = {}
    for r in net.links:
        if r.received_bps is not None:
            key = (r.sender, r.receiver)
            best[key] = max(best.get(key, 0.0), r.received_bps)
    return list(net.hosts), best


def applies_when(when: str) -> str:
    """Why a check had nothing to judge: when it applies (its APPLIES), said as a clause."""
    return f"applies when {when}" if when else "found nothing to judge in this run"


def verdict_text(report: Report) -> str:
    return "GO" if report.verdict is Verdict.GO else "NO-GO"


def host_table(hosts: Mapping[str, HostEntry]) -> list[tuple[str, list[tuple[str, bool]]]]:
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


def cost_text(nbytes: int, with_s: float, without_s: float, basis: str,
              what: Optional[str] = None, double_at: Optional[float] = None) -> str:
    """Returns what keeping a left-out host costs, in one phrase: 'with it, 32 MiB all-reduce
    ~22 s vs ~1.1 s without (20x, predicted from the iperf3 links)'; for a PS job's server
    host, 'with a server on it, ~2.1 s a step vs ~0.4 s without (...)'."""
    factor = f"{with_s / without_s:.2g}x, " if without_s > 0 else ""
    if what == "ps-step":
        # The round trains a small model of its own: said, with the step size at which the
        # host would double the step, for the user to set against the job's model.
        at = (f"; a model exchanging {bytes_text(double_at)} a step with a server would "
              "cost 2x" if double_at else "; it would never cost 2x, whatever the model")
        return (f"with a server on it, ~{seconds_text(with_s)} a step vs "
                f"~{seconds_text(without_s)} without ({factor}with the PS round's own small "
                f"model, whose steps exchange {bytes_text(nbytes)} with a server{at}; "
                f"{basis})")
    return (f"with it, {nbytes / (1 << 20):g} MiB all-reduce ~{with_s:.2g} s vs "
            f"~{without_s:.2g} s without ({factor}{basis})")


def bytes_text(n: float) -> str:
    return next((f"{n / (1 << k):.3g} {unit}" for k, unit in ((30, "GiB"), (20, "MiB"),
                                                              (10, "KiB")) if n >= 1 << k),
                f"{n:.0f} B")


def seconds_text(s: float) -> str:
    return f"{s * 1e3:.2g} ms" if s < 1 else f"{s:.2g} s"


def cost_of(plan: PlanEntry, host: str) -> Optional[str]:
    """Returns the cost phrase of a left-out host in a report's plan, if it has one."""
    c = plan.costs.get(host)
    return None if c is None else cost_text(c.bytes, c.with_s, c.without_s, c.basis or "",
                                          c.what, c.double_at)
