"""Markdown for CI summaries (GitHub's step summary, GitLab's merge request notes): the
verdict first, then what blocks, the plan, the network figures and the hosts side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from preflight.common.grouping import group, left_out
from preflight.common.summary import (
    QUIET,
    STATUS_WORDS,
    cost_of,
    host_table,
    link_matrix,
    sorted_findings,
    verdict_text,
    waived_checks,
)
from preflight.common.units import hostlist, rate

ICONS = {"error": "🛑", "fail": "❌", "could-not-check": "❓", "warn": "⚠️", "pass": "✅",
         "skip": "➖"}


CELL_MAX = 400  # characters of one cell: a line stays readable (the JSON has it all)
HOSTS_MAX = 80  # the hosts cell: a compressed hostlist, counted when cut


def cell(text: object, limit: int = CELL_MAX) -> str:
    """Returns text safe inside a table cell: pipes escaped, one line, no raw HTML, cut at
    limit characters."""
    s = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    if len(s) > limit:
        s = s[:limit - 3] + "..."
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


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
    # One row per thing found, its hosts compressed (gpu[001-500]); each finding with its
    # own values is in the JSON report.
    groups = group(sorted_findings(doc))
    bad = [g for g in groups if g.status not in QUIET]
    passed = [g for g in groups if g.status in QUIET]
    if bad:
        out += ["", "### Findings", ""]
        out += _table(["", "status", "check", "hosts", "message"], [
            [ICONS.get(g.status, ""), STATUS_WORDS.get(g.status, "?"), g.check,
             cell(g.hosts_text(HOSTS_MAX), HOSTS_MAX + 20), g.message] for g in bad])
    if passed:
        out += ["", f"<details><summary>{len(passed)} passed or n/a</summary>", ""]
        out += _table(["", "check", "message"], [[ICONS.get(g.status, ""), g.check, g.message]
                                                 for g in passed])
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
    for hosts, why, more in left_out(plan.get("excluded") or {}):
        cost = cost_of(plan, hosts[0]) if len(hosts) == 1 else None
        out.append(f"- left out **{cell(hostlist(hosts, HOSTS_MAX))}**: {cell(why)}"
                   + (f" (+{more} more)" if more else "") + (f" ({cell(cost)})" if cost else ""))
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
    """One row per host (a column per host would make one line of every fact at 500
    hosts), collapsed; what differs from most hosts is bold: the cell to look at."""
    if not hosts:
        return []
    table = host_table(hosts)
    rows = [[str(h)] + [f"**{cells[i][0]}**" if cells[i][1] else cells[i][0]
                        for _, cells in table] for i, h in enumerate(hosts)]
    return ["", f"<details><summary>Hosts ({len(hosts)})</summary>", "",
            *_table(["host", *(label for label, _ in table)], rows), "", "</details>"]
