"""Markdown for CI summaries (GitHub's step summary, GitLab's merge request notes): the
verdict first, then what blocks, the plan, the network figures and the hosts side by side."""

from __future__ import annotations

from collections.abc import Mapping

from preflight.common.grouping import group, left_out
from preflight.common.summary import (
    QUIET,
    STATUS_WORDS,
    applies_when,
    cost_of,
    host_table,
    link_matrix,
    sorted_findings,
    verdict_text,
)
from preflight.common.units import hostlist, rate
from preflight.model.findings import Verdict
from preflight.model.report import HostEntry, PlanEntry, Report

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


def render(report: Report) -> str:
    """Returns the Markdown summary of a report."""
    go = report.verdict is Verdict.GO
    out = [f"## preflight: {'✅' if go else '❌'} {verdict_text(report)}", ""]
    for r in report.reasons:
        out.append(f"- {cell(r)}")
    if report.waived:
        out.append(f"- waived (not run, `--skip`): {cell(', '.join(report.waived))}")
    if report.not_applicable:
        out.append("- nothing to judge in this run: " + cell("; ".join(
            f"{name} ({applies_when(when)})" for name, when in report.not_applicable.items())))
    # One row per thing found, its hosts compressed (gpu[001-500]); each finding with its
    # own values is in the JSON report.
    groups = group(sorted_findings(report))
    bad = [g for g in groups if g.status not in QUIET]
    passed = [g for g in groups if g.status in QUIET]
    if bad:
        out += ["", "### Findings", ""]
        out += _table(["", "status", "check", "hosts", "message", "fix"], [
            [ICONS.get(g.status, ""), STATUS_WORDS.get(g.status, "?"), g.check,
             cell(g.hosts_text(HOSTS_MAX), HOSTS_MAX + 20), g.message, g.fix] for g in bad])
    if passed:
        out += ["", f"<details><summary>{len(passed)} passed or n/a</summary>", ""]
        out += _table(["", "check", "message"], [[ICONS.get(g.status, ""), g.check, g.message]
                                                 for g in passed])
        out += ["", "</details>"]
    if report.plan is not None:
        out += _plan(report.plan)
    out += _network(report)
    out += _hosts(report.hosts)
    return "\n".join(out) + "\n"


def _plan(plan: PlanEntry) -> list[str]:
    out = ["", f"### Plan ({plan.mode}{'' if plan.fits else ', does not fit'})", ""]
    out += [f"- lacks: {cell(x)}" for x in plan.lacks]
    roles: dict[str, list[str]] = {}
    for kind, endpoints in (("server", plan.servers), ("worker", plan.workers)):
        for e in endpoints:
            roles.setdefault(e.host, []).append(f"{kind} {e.endpoint}")
    rows = [[n.host, str(n.address), str(n.rank), str(n.nproc), ", ".join(roles.get(n.host, []))]
            for n in plan.nodes]
    if rows:
        out += _table(["host", "address", "rank", "processes", "endpoints"], rows)
    for hosts, why, more in left_out(plan.excluded):
        cost = cost_of(plan, hosts[0]) if len(hosts) == 1 else None
        out.append(f"- left out **{cell(hostlist(hosts, HOSTS_MAX))}**: {cell(why)}"
                   + (f" (+{more} more)" if more else "") + (f" ({cell(cost)})" if cost else ""))
    return out


def _network(report: Report) -> list[str]:
    net = report.network
    if net is None:
        return []
    hosts, best = link_matrix(report)
    out = ["", "### Network", ""]
    if best:
        slow = min(best.items(), key=lambda kv: kv[1])
        out.append(f"- iperf3 ({net.schedule}): {len(best)} links between "
                   f"{len(hosts)} hosts, fastest {rate(max(best.values()))}, slowest "
                   f"{rate(slow[1])} ({cell(slow[0][0])} → {cell(slow[0][1])})")
    ar = net.allreduce
    if ar is not None and ar.sizes:
        sizes = ", ".join(f"{s.bytes / (1 << 20):g} MiB: busbw "
                          f"{s.busbw_bytes_s / 1e9:.3g} GB/s" for s in ar.sizes)
        out.append(f"- all-reduce ({ar.backend}, {ar.ranks} ranks): {sizes}")
    elif ar is not None:
        out.append(f"- all-reduce ({ar.backend}) failed: {cell(ar.error)}")
    elif net.allreduce_skipped:
        out.append(f"- all-reduce not run: {cell(net.allreduce_skipped)}")
    return out


def _hosts(hosts: Mapping[str, HostEntry]) -> list[str]:
    """One row per host (a column per host would make one line of every fact at 500
    hosts), collapsed; what differs from most hosts is bold: the cell to look at."""
    if not hosts:
        return []
    table = host_table(hosts)
    rows = [[h] + [f"**{cells[i][0]}**" if cells[i][1] else cells[i][0]
                   for _, cells in table] for i, h in enumerate(hosts)]
    return ["", f"<details><summary>Hosts ({len(hosts)})</summary>", "",
            *_table(["host", *(label for label, _ in table)], rows), "", "</details>"]
