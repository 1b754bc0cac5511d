"""A self-contained HTML report: verdict, findings, hosts side by side, a heatmap of the
iperf3 matrix and a chart of the all-reduce. Inline CSS and SVG only: no script, no font,
no request, so it opens anywhere (a CI artifact, a mail attachment, an air-gapped laptop)."""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Mapping
from typing import Optional

from preflight import __version__
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
from preflight.model.report import HostEntry, NetworkEntry, PlanEntry, Report

CELL = 72  # heatmap cell size in px
HEATMAP_MAX = 32  # hosts up to which the sender x receiver grid is drawn; past it, per host
HOSTS_OPEN = 16  # hosts up to which the host and plan tables show open, a column per host
HOSTS_MAX = 120  # characters of a hostlist in a cell
LABEL_W = 120
CSS = """span.bar{display:inline-block;height:10px;vertical-align:middle}

body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:16px 24px}
h2{margin:28px 0 8px;font-size:18px}
.banner{padding:18px 24px;color:#fff;font-size:26px;font-weight:700}
.banner.go{background:#1f8f4e}.banner.nogo{background:#c62828}
.banner ul{font-size:14px;font-weight:400;margin:6px 0 0;padding-left:20px}
table{border-collapse:collapse;background:#fff;width:100%}
td,th{border:1px solid #d9dde3;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f3}
.st{font-weight:700;white-space:nowrap}
.s-error,.s-fail{color:#c62828}.s-could-not-check{color:#8e24aa}.s-warn{color:#b26a00}.s-skip{color:#6b7280}
.s-pass{color:#1f8f4e}
td.diff{background:#ffe0b2;font-weight:700}
.muted{color:#667085;font-size:12px}
svg text{font:12px system-ui,sans-serif}
.figures{display:flex;flex-wrap:wrap;gap:32px;align-items:flex-start}
.chip{display:inline-block;border:1px solid #d9dde3;border-radius:12px;padding:2px 10px;
margin-right:6px;background:#fff;font-weight:600}
summary h2{display:inline-block}
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def heat_color(ratio: float) -> str:
    """Returns the cell colour for bps / fastest: red (slow) through yellow to green (fast)."""
    ratio = max(0.0, min(1.0, ratio))
    return f"hsl({round(120 * ratio)},70%,45%)"


def render(report: Report) -> str:
    """Returns the whole HTML page of a report."""
    go = report.verdict is Verdict.GO
    reasons = "".join(f"<li>{esc(r)}</li>" for r in report.reasons)
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.started_at or 0))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<title>preflight: {verdict_text(report)}</title><style>{CSS}</style></head><body>",
        f"<div class='banner {'go' if go else 'nogo'}' id='verdict'>{verdict_text(report)}"
        f"{f'<ul>{reasons}</ul>' if reasons else ''}</div><main>",
        _counts(report), _findings(report, passed=False),
        f"<div class='figures'><div>{_heatmap(report)}</div><div>{_allreduce(report)}</div>"
        "</div>",
        _hosts(report.hosts), _plan(report.plan), _findings(report, passed=True),
        f"<p class='muted'>preflight {esc(__version__)}, run started {esc(when)}, "
        f"{esc('?' if report.duration_s is None else report.duration_s)} s; inventory "
        f"{esc(report.inventory or '-')}"
        "</p></main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _counts(report: Report) -> str:
    """Returns one line of counts: hosts, and things found by status, counted as the tables
    below show them (grouped: one fault on 500 hosts is 1, not 500)."""
    hosts = report.hosts
    ok = sum(1 for h in hosts.values() if h.ok)
    by: dict[str, int] = {}
    for g in group(sorted_findings(report)):
        by[g.status] = by.get(g.status, 0) + 1
    chips = [f"<span class='chip'>{ok} of {len(hosts)} hosts checked</span>"]
    chips += [f"<span class='chip s-{esc(st)}'>{by[st]} {esc(STATUS_WORDS[st])}</span>"
              for st in STATUS_WORDS if by.get(st)]
    chips += [f"<span class='chip' id='waived'>waived (not run): {esc(', '.join(waived))}"
              "</span>" for waived in [report.waived] if waived]
    idle = report.not_applicable
    chips += [f"<span class='chip' id='not-applicable' title='{esc(why)}'>nothing to judge "
              f"in this run: {esc(', '.join(idle))}</span>" for why in [
                  "; ".join(f"{name}: {applies_when(when)}" for name, when in idle.items())]
              if idle]
    return f"<p id='counts'>{''.join(chips)}</p>"


def _findings(report: Report, passed: bool) -> str:
    """Returns the problems table (passed False) or the passed checks, folded (True): one row
    per thing found, its hosts compressed (each host's own values are in the JSON)."""
    rows = []
    for g in group(sorted_findings(report)):
        st = g.status
        if (st in QUIET) != passed:
            continue
        rows.append(f"<tr class='finding s-row-{esc(st)}'><td class='st s-{esc(st)}'>"
                    f"{esc(STATUS_WORDS.get(st, st))}</td><td>{esc(g.check)}</td>"
                    f"<td>{esc(g.hosts_text(HOSTS_MAX))}</td>"
                    f"<td>{esc(g.message)}</td>"
                    + ("" if passed else f"<td class='fix'>{esc(g.fix)}</td>") + "</tr>")
    table = ("<tr><th>status</th><th>check</th><th>hosts</th><th>message</th>"
             + ("" if passed else "<th>fix</th>") + "</tr>" + "".join(rows))
    if passed:
        return (f"<details><summary><h2>Passed ({len(rows)})</h2></summary>"
                f"<table id='passed'>{table}</table></details>") if rows else ""
    if not rows:
        return "<h2>Findings</h2><p class='s-pass'>nothing to report: every check passed</p>"
    return f"<h2>Findings</h2><table id='findings'>{table}</table>"


def _heatmap(report: Report) -> str:
    net = report.network
    hosts, best = link_matrix(report)
    if net is None or not best:
        return ("<h2>Bandwidth</h2><p class='muted'>no iperf3 figures in this report "
                "(run without --no-network-tests, with two hosts or more)</p>")
    if len(hosts) > HEATMAP_MAX:
        return _per_host(net, hosts, best)
    top = max(best.values())
    n = len(hosts)
    width, height = max(LABEL_W + n * CELL + 10, LABEL_W + 420), LABEL_W + n * CELL + 40
    svg = [f"<svg id='heatmap' xmlns='http://www.w3.org/2000/svg' width='{width}' "
           f"height='{height}' role='img' aria-label='iperf3 bandwidth, sender by receiver'>",
           "<text x='4' y='14'>receiver &#8594;</text>",
           f"<text x='4' y='{LABEL_W - 8}'>sender &#8595;</text>"]
    for j, h in enumerate(hosts):
        x = LABEL_W + j * CELL + CELL / 2
        svg.append(f"<text x='{x}' y='{LABEL_W - 8}' "
                   f"transform='rotate(-40 {x} {LABEL_W - 8})'>{esc(h)}</text>")
    for i, s in enumerate(hosts):
        y = LABEL_W + i * CELL
        svg.append(f"<text x='{LABEL_W - 6}' y='{y + CELL / 2 + 4}' text-anchor='end'>"
                   f"{esc(s)}</text>")
        for j, r in enumerate(hosts):
            x = LABEL_W + j * CELL
            bps = best.get((s, r))
            if s == r:
                fill, label, tip = "#d0d4da", "", s
            elif bps is None:
                fill, label, tip = "#ffffff", "&#8211;", f"{s} -> {r}: not measured"
            else:
                fill, label = heat_color(bps / top), esc(rate(bps).replace("bit/s", ""))
                tip = f"{s} -> {r}: {rate(bps)}"
            svg.append(f"<g class='cell' data-sender='{esc(s)}' data-receiver='{esc(r)}' "
                       f"data-bps='{'' if bps is None else round(bps)}'><title>{esc(tip)}"
                       f"</title><rect x='{x}' y='{y}' width='{CELL}' height='{CELL}' "
                       f"fill='{fill}' stroke='#fff'/><text x='{x + CELL / 2}' "
                       f"y='{y + CELL / 2 + 4}' text-anchor='middle' "
                       f"fill='{'#98a2b3' if bps is None else '#fff'}'>{label}"
                       "</text></g>")
    y = LABEL_W + n * CELL + 18
    for k in range(5):
        svg.append(f"<rect x='{LABEL_W + k * 40}' y='{y}' width='40' height='12' "
                   f"fill='{heat_color(k / 4)}'/>")
    svg.append(f"<text x='{LABEL_W + 210}' y='{y + 11}'>0 &#8230; {esc(rate(top))} "
               "(the fastest link)</text></svg>")
    note = ("ring: each host against its neighbours; --network-matrix measures every pair"
            if net.schedule == "ring" else "every ordered pair of hosts")
    return (f"<h2>Bandwidth (iperf3, best run per pair)</h2><p class='muted'>{esc(note)}</p>"
            + "".join(svg))


def _per_host(net: NetworkEntry, hosts: list[str],
              best: Mapping[tuple[str, str], float]) -> str:
    """Past HEATMAP_MAX hosts an n x n grid is mostly empty (the ring measures O(n) pairs)
    and too big to read: each host's slowest and fastest send and receive instead, the
    slowest hosts first."""
    top = max(best.values())
    sends: dict[str, list[float]] = {h: [] for h in hosts}
    recvs: dict[str, list[float]] = {h: [] for h in hosts}
    for (s, r), bps in best.items():
        sends.setdefault(s, []).append(bps)
        recvs.setdefault(r, []).append(bps)

    def worst(h: str) -> tuple[float, float]:
        """Slowest link first; of two hosts on one slow link, the one whose links are all
        slow (its fastest is slow too) is the slow host."""
        mine = sends[h] + recvs[h]
        return (min(mine, default=float("inf")), max(mine, default=float("inf")))

    def bar(values: list[float], pick: Callable[[list[float]], float]) -> str:
        if not values:
            return "<td class='muted'>&#8211;</td>"
        v = pick(values)
        return (f"<td><span class='bar' style='width:{max(2, round(60 * v / top))}px;"
                f"background:{heat_color(v / top)}'></span> {esc(rate(v))}</td>")

    rows = "".join(
        f"<tr class='link-host' data-host='{esc(h)}'><th>{esc(h)}</th>"
        f"{bar(sends[h], min)}{bar(sends[h], max)}{bar(recvs[h], min)}{bar(recvs[h], max)}</tr>"
        for h in sorted(hosts, key=worst))
    note = (f"{len(hosts)} hosts, {len(best)} measured pairs ({net.schedule}): per "
            "host, the slowest first (a grid of every pair would be mostly empty)")
    return (f"<h2>Bandwidth (iperf3, best run per pair)</h2><p class='muted'>{esc(note)}</p>"
            "<details open><summary>per host</summary><table id='per-host-links'><tr><th>"
            "host</th><th>slowest send</th><th>fastest send</th><th>slowest receive</th>"
            f"<th>fastest receive</th></tr>{rows}</table></details>")


def _allreduce(report: Report) -> str:
    net = report.network
    ar = net.allreduce if net is not None else None
    if ar is None:
        why = net.allreduce_skipped if net is not None else None
        return f"<h2>All-reduce</h2><p class='muted'>not run{': ' + esc(why) if why else ''}</p>"
    if not ar.sizes:
        return (f"<h2>All-reduce</h2><p class='s-fail'>{esc(ar.backend)} all-reduce "
                f"failed: {esc(ar.error)}</p>")
    sizes = ar.sizes
    top = max(max(s.busbw_bytes_s, s.algbw_bytes_s) for s in sizes) or 1.0
    # CPU clusters all-reduce at MB/s, GPU ones at GB/s: label in the unit that reads.
    unit, scale = ("GB/s", 1e9) if top >= 1e9 else ("MB/s", 1e6)
    bar_w, chart_h, gap, top_pad = 34, 180, 40, 20
    width = 60 + len(sizes) * (2 * bar_w + gap) + 200
    svg = [f"<svg id='allreduce' xmlns='http://www.w3.org/2000/svg' width='{width}' "
           f"height='{chart_h + 50 + top_pad}' role='img' "
           "aria-label='all-reduce bandwidth by size'>",
           f"<g transform='translate(0 {top_pad})'>",
           f"<line x1='50' y1='{chart_h + 10}' x2='{width - 200}' y2='{chart_h + 10}' "
           "stroke='#667085'/>"]
    for k, s in enumerate(sizes):
        x0 = 60 + k * (2 * bar_w + gap)
        for m, (key, v, color) in enumerate((("busbw", s.busbw_bytes_s, "#3559c7"),
                                             ("algbw", s.algbw_bytes_s, "#9db2ef"))):
            h = chart_h * v / top
            x = x0 + m * bar_w
            svg.append(f"<rect class='bar' data-{key}='{round(v)}' x='{x}' "
                       f"y='{chart_h + 10 - h}' width='{bar_w - 4}' height='{h}' "
                       f"fill='{color}'><title>{esc(f'{v / scale:.3g} {unit}')}</title></rect>"
                       f"<text x='{x + bar_w / 2 - 2}' y='{chart_h + 5 - h}' "
                       f"text-anchor='middle'>{v / scale:.3g}</text>")
        svg.append(f"<text x='{x0 + bar_w}' y='{chart_h + 28}' text-anchor='middle'>"
                   f"{s.bytes / (1 << 20):g} MiB</text>")
    lx = width - 190
    svg.append(f"<rect x='{lx}' y='20' width='12' height='12' fill='#3559c7'/><text "
               f"x='{lx + 18}' y='31'>busbw {unit}</text><rect x='{lx}' y='40' width='12' "
               f"height='12' fill='#9db2ef'/><text x='{lx + 18}' y='51'>algbw {unit}</text>"
               "</g></svg>")
    return (f"<h2>All-reduce ({esc(ar.backend)}, {esc(ar.ranks)} ranks on "
            f"{len(ar.hosts)} hosts)</h2>" + "".join(svg))


def _plan(plan: Optional[PlanEntry]) -> str:
    if plan is None:
        return ""
    rows = "".join(
        f"<tr><td>{esc(n.host)}</td><td>{esc(n.address)}</td>"
        f"<td>{esc(n.rank)}</td><td>{esc(n.nproc)}</td>"
        f"<td><code>{esc(n.command)}</code></td></tr>" for n in plan.nodes)
    lacks = "".join(f"<li class='s-fail'>lacks: {esc(x)}</li>" for x in plan.lacks)
    out = ""
    for hosts, why, more in left_out(plan.excluded):
        cost = cost_of(plan, hosts[0]) if len(hosts) == 1 else None
        out += (f"<li>left out <b>{esc(hostlist(hosts, HOSTS_MAX))}</b>: {esc(why)}"
                + (f" (+{more} more)" if more else "")
                + (f" <i>({esc(cost)})</i>" if cost else "") + "</li>")
    nodes = plan.nodes
    return (f"<h2>Plan ({esc(plan.mode)})</h2><ul>{lacks}{out}</ul>"
            f"<details{' open' if len(nodes) <= HOSTS_OPEN else ''}><summary>{len(nodes)} "
            "hosts</summary><table id='plan'><tr><th>host</th><th>address</th><th>rank</th>"
            f"<th>processes</th><th>command</th></tr>{rows}</table></details>")


def _hosts(hosts: Mapping[str, HostEntry]) -> str:
    if not hosts:
        return ""
    if len(hosts) > HOSTS_OPEN:  # a column per host would be a 500-column table: a row each
        table = host_table(hosts)
        head = "".join(f"<th>{esc(label)}</th>" for label, _ in table)
        body = "".join(
            f"<tr><th>{esc(h)}</th>" + "".join(
                f"<td class='{'diff' if cells[i][1] else ''}'>{esc(cells[i][0])}</td>"
                for _, cells in table) + "</tr>" for i, h in enumerate(hosts))
        return (f"<details><summary><h2>Hosts ({len(hosts)})</h2></summary><table id='hosts'>"
                f"<tr><th>host</th>{head}</tr>{body}</table></details>")
    head = "".join(f"<th>{esc(h)}</th>" for h in hosts)
    rows = []
    for label, cells in host_table(hosts):
        tds = "".join(f"<td class='{'diff' if odd else ''}'>{esc(v)}</td>" for v, odd in cells)
        rows.append(f"<tr><th>{esc(label)}</th>{tds}</tr>")
    return (f"<h2>Hosts</h2><table id='hosts'><tr><th></th>{head}</tr>{''.join(rows)}"
            "</table>")
