"""Markdown for CI summaries (GitHub's step summary, GitLab's merge request notes): the
verdict first, then what blocks, the plan, the network figures and the hosts side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflight.report.summary import (
    STATUS_WORDS,
    cost_of,
    host_table,
    link_matrix,
    sorted_findings,
    verdict_text,
    waived_checks,
)
from preflight.report.units import rate

ICONS = {"error": "🛑", "fail": "❌", "could-not-check": "❓", "warn": "⚠️", "pass": "✅"}


def cell(text: object) -> str:
    """Returns text safe inside a table cell: pipes escaped, one line, no raw HTML."""
    s = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    s = "".join(ch if ch.isprintable() else " " for ch in s)
    return " ".join(s.split())


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def render(doc: Mapping[str, Any]) -> str:
    """Returns the Markdown summary of a JSON report."""
    go = doc.get("verdict") == "go"
    out = [f"## preflight: {'✅' if go else '❌'} {verdict_text(doc)}", ""]
    for r in doc.get("reasons") or []:
        out.append(f"- {cell(r)}")
    waived = waived_checks(doc)
    if waived:
        out.append(f"- waived (not run, `--skip`): {cell(', '.join(waived))}")
    findings = sorted_findings(doc)
    bad = [f for f in findings if f.get("status") != "pass"]
    passed = [f for f in findings if f.get("status") == "pass"]
    if bad:
        out += ["", "### Findings", ""]
        out += _table(["", "status", "check", "hosts", "message"], [
            [ICONS.get(f.get("status", ""), ""), STATUS_WORDS.get(f.get("status", ""), "?"),
             str(f.get("check")), ", ".join(map(str, f.get("hosts") or [])) or "cluster",
             str(f.get("message"))] for f in bad])
    if passed:
        out += ["", f"<details><summary>{len(passed)} passed</summary>", ""]
        out += _table(["check", "message"], [[str(f.get("check")), str(f.get("message"))]
                                             for f in passed])
        out += ["", "</details>"]
    out += _plan(doc.get("plan"))
    out += _network(doc)
    out += _hosts(doc.get("hosts") or {})
    return "\n".join(out) + "\n"


def _plan(plan: Any) -> list[str]:
    if not isinstance(plan, dict):
        return []
    out = ["", f"### Plan ({plan.get('mode')}{'' if plan.get('fits') else ', does not fit'})",
           ""]
    out += [f"- lacks: {cell(x)}" for x in plan.get("lacks") or []]
    roles: dict[str, list[str]] = {}
    for kind in ("servers", "workers"):
        for e in plan.get(kind) or []:
            roles.setdefault(e.get("host"), []).append(f"{kind[:-1]} {e.get('endpoint')}")
    rows = [[str(n.get("host")), str(n.get("address")), str(n.get("rank")),
             str(n.get("nproc")), ", ".join(roles.get(n.get("host"), []))]
            for n in plan.get("nodes") or []]
    if rows:
        out += _table(["host", "address", "rank", "processes", "endpoints"], rows)
    for host, reasons in (plan.get("excluded") or {}).items():
        cost = cost_of(plan, host)
        out.append(f"- left out **{cell(host)}**: {cell('; '.join(reasons))}"
                   + (f" ({cell(cost)})" if cost else ""))
    return out


def _network(doc: Mapping[str, Any]) -> list[str]:
    net = doc.get("network")
    if not isinstance(net, dict):
        return []
    hosts, best = link_matrix(doc)
    out = ["", "### Network", ""]
    if best:
        slow = min(best.items(), key=lambda kv: kv[1])
        out.append(f"- iperf3 ({net.get('schedule')}): {len(best)} links between "
                   f"{len(hosts)} hosts, fastest {rate(max(best.values()))}, slowest "
                   f"{rate(slow[1])} ({cell(slow[0][0])} → {cell(slow[0][1])})")
    ar = net.get("allreduce")
    if isinstance(ar, dict) and ar.get("sizes"):
        sizes = ", ".join(f"{s['bytes'] / (1 << 20):g} MiB: busbw "
                          f"{s['busbw_bytes_s'] / 1e9:.3g} GB/s" for s in ar["sizes"])
        out.append(f"- all-reduce ({ar.get('backend')}, {ar.get('ranks')} ranks): {sizes}")
    elif isinstance(ar, dict):
        out.append(f"- all-reduce ({ar.get('backend')}) failed: {cell(ar.get('error'))}")
    elif net.get("allreduce_skipped"):
        out.append(f"- all-reduce not run: {cell(net['allreduce_skipped'])}")
    return out


def _hosts(hosts: Mapping[str, Any]) -> list[str]:
    if not hosts:
        return []
    # Bold what differs from most hosts: the cell an operator has to look at.
    rows = [[label] + [f"**{v}**" if odd else v for v, odd in cells]
            for label, cells in host_table(hosts)]
    return ["", "<details><summary>Hosts</summary>", "",
            *_table(["", *map(str, hosts)], rows), "", "</details>"]
