"""A watch's log shown again: its course as terminal lines (what was found, cleared and done,
when), and a self-contained HTML page with each job's ranks over time (progress a second and
busy cores, one line a rank, the findings marked where they came) and a timeline of what its
time went to (stepping, checkpoints, evaluations, a straggler, a hang: timeshare.py)."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any

from preflight.common.units import hostlist
from preflight.watch.replay import RankCourse, WatchLog
from preflight.watch.series import UNIT_WORDS, Unit
from preflight.watch.timeshare import KINDS, WORDS, Ledger, Spell, summary

W, H, PAD = 760, 180, 44  # a chart's size and its left margin, in pixels
# A colour for each kind of a job's time, in KINDS' order: stepping green, phases blue,
# what holds the job warm to red, the rest grey.
TIME_COLOURS = ("#2ca02c", "#1f77b4", "#17becf", "#9edae5", "#dbdb8d", "#ff7f0e", "#e377c2",
                "#d62728", "#8c564b", "#9467bd", "#bcbd22", "#c7c7c7")
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def _event_line(e: dict[str, Any]) -> str:
    if e["type"] == "act":
        return f"{_clock(e['at'])}  act      {e.get('step', ''):<10} {e.get('text', '')}"
    status = "cleared" if e["type"] == "cleared" else e.get("status", "")
    return (f"{_clock(e['at'])}  {status:<8} {e.get('check', ''):<10} "
            f"{hostlist(list(e.get('hosts') or ()))}: {e.get('message', '')}")


def _thinned(log: WatchLog) -> str:
    """How the log thinned its samples to stay in its bound (--log-max-mb), where it did."""
    if not log.thinned:
        return ""
    every = log.thinned[-1][1]
    kept = f"one in {every} of a host's samples" if every else "only the samples it must"
    return (f"; samples thinned from {_clock(log.thinned[0][0])} to stay within --log-max-mb "
            f"(at the end {kept}; every finding kept)")


def text(log: WatchLog) -> list[str]:
    """The watch's course: what it watched, then every finding, clearing and action."""
    end = log.ended if log.ended is not None else max(
        [log.started, *(e["at"] for e in log.events)])
    jobs = log.jobs()
    out = [f"watch of {len(jobs)} job(s) on {hostlist(log.hosts) or 'no host'}, "
           f"{_clock(log.started)} to {_clock(end)} ({end - log.started:.0f} s), "
           f"{log.samples} samples" + _thinned(log) + ("" if log.ended is not None else
                                                       "; the watch was stopped before its end")]
    for key, courses in jobs.items():
        unit = log.unit(courses)
        out.append(f"job {key}: {len(courses)} ranks on "
                   f"{hostlist(sorted({c.rid.host for c in courses}))}, counted in "
                   f"{UNIT_WORDS[unit]}" + _time_said(log.times.get(key, [])))
    out += [_event_line(e) for e in log.events]
    out += [f"last: {e.get('status', '')} {e.get('check', '')}: {e.get('message', '')}"
            for e in log.last]
    return out


def _time_said(spells: Sequence[Spell]) -> str:
    """"; its time since 19:02:05 (24 min): 71 % stepping, ..." where the log kept it."""
    if not spells:
        return ""
    said = summary(Ledger(list(spells)), max(s.end for s in spells), _clock(spells[0].start))
    return f"; its time {said}" if said else ""


def _timeline(spells: Sequence[Spell]) -> str:
    """A strip of the job's time, a box a spell coloured by its kind, and its legend."""
    if not spells:
        return "<p>what its time went to was not kept (a log of an earlier version)</p>"
    t0, t1 = spells[0].start, max(s.end for s in spells)
    span = max(t1 - t0, 1e-9)

    def x(t: float) -> float:
        return PAD + (t - t0) / span * (W - PAD - 10)

    parts = [f'<svg width="{W}" height="46" role="img">']
    for s in spells:
        colour = TIME_COLOURS[KINDS.index(s.kind)]
        tip = html.escape(f"{WORDS[s.kind]}: {_clock(s.start)} to {_clock(s.end)} "
                          f"({s.end - s.start:.0f} s)")
        wide = max(x(s.end) - x(s.start), 0.5)
        parts.append(f'<rect x="{x(s.start):.1f}" y="4" width="{wide:.1f}" height="22" '
                     f'fill="{colour}"><title>{tip}</title></rect>')
    parts += [f'<text x="{PAD}" y="42" font-size="11">{_clock(t0)}</text>',
              f'<text x="{W - 60}" y="42" font-size="11">{_clock(t1)}</text>', "</svg>"]
    kinds = [k for k in KINDS if any(s.kind == k for s in spells)]
    legend = "".join(f'<span style="color:{TIME_COLOURS[KINDS.index(k)]}">&#9632; '
                     f"{html.escape(WORDS[k])}</span> " for k in kinds)
    return "".join(parts) + f"<p>{legend}</p>"


def _chart(courses: Sequence[RankCourse], unit: Unit, what: str, t0: float, t1: float,
           marks: Sequence[dict[str, Any]]) -> str:
    series: list[tuple[RankCourse, list[tuple[float, float]]]] = []
    for c in courses:
        raw = [(p.t, p.rate if what == "rate" else p.busy) for p in c.points(unit)]
        series.append((c, [(t, v) for t, v in raw if v is not None]))
    top = max([v for _, pts in series for _, v in pts] + [1e-9])
    span = max(t1 - t0, 1e-9)

    def x(t: float) -> float:
        return PAD + (t - t0) / span * (W - PAD - 10)

    def y(v: float) -> float:
        return H - 20 - v / top * (H - 30)

    parts = [f'<svg width="{W}" height="{H}" role="img">',
             f'<line x1="{PAD}" y1="{H - 20}" x2="{W - 10}" y2="{H - 20}" stroke="#999"/>',
             f'<text x="2" y="14" font-size="11">{top:.3g}</text>',
             f'<text x="2" y="{H - 22}" font-size="11">0</text>',
             f'<text x="{PAD}" y="{H - 4}" font-size="11">{_clock(t0)}</text>',
             f'<text x="{W - 60}" y="{H - 4}" font-size="11">{_clock(t1)}</text>']
    for e in marks:
        if t0 <= e["at"] <= t1:
            colour = "#2ca02c" if e["type"] == "cleared" else "#d62728"
            label = html.escape(f"{e.get('check') or e.get('step')}: "
                                f"{hostlist(list(e.get('hosts') or ()))}")
            parts.append(f'<line x1="{x(e["at"]):.1f}" y1="10" x2="{x(e["at"]):.1f}" '
                         f'y2="{H - 20}" stroke="{colour}" stroke-dasharray="3,3">'
                         f'<title>{label}</title></line>')
    for i, (c, pts) in enumerate(series):
        if not pts:
            continue
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        parts.append(f'<polyline fill="none" stroke="{COLOURS[i % len(COLOURS)]}" '
                     f'stroke-width="1.5" points="{path}"><title>{html.escape(c.rid.name())}'
                     '</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def page(log: WatchLog) -> str:
    """The HTML page: the course in words, then per job its ranks' charts and a legend."""
    body = [f"<h1>preflight watch</h1><p>{html.escape(text(log)[0])}</p>"]
    # A job's charts span its own ranks' samples (the clock of the hosts).
    marks = [e for e in log.events if e["type"] in ("finding", "cleared", "act")]
    for key, courses in log.jobs().items():
        unit = log.unit(courses)
        ts = [s.t for c in courses for s in c.samples]
        t0, t1 = min(ts), max(ts)
        legend = "".join(f'<span style="color:{COLOURS[i % len(COLOURS)]}">&#9632; '
                         f"{html.escape(c.rid.name())}</span> " for i, c in enumerate(courses))
        body.append(f"<h2>job {html.escape(key)}</h2><p>{legend}</p>"
                    f"<h3>progress ({html.escape(UNIT_WORDS[unit])} a second)</h3>"
                    + _chart(courses, unit, "rate", t0, t1, marks)
                    + "<h3>busy cores (on a CPU or waiting for one)</h3>"
                    + _chart(courses, unit, "busy", t0, t1, marks)
                    + "<h3>what its time went to</h3><p>"
                    + html.escape(_time_said(log.times.get(key, [])).removeprefix("; "))
                    + "</p>" + _timeline(log.times.get(key, [])))
    rows = "".join(f"<tr><td>{html.escape(line[:8])}</td><td>{html.escape(line[10:])}</td></tr>"
                   for line in map(_event_line, log.events))
    body.append("<h2>what the watch found and did</h2>"
                + (f"<table>{rows}</table>" if rows else "<p>nothing</p>"))
    if log.last:
        body.append("<h2>at its end</h2><ul>" + "".join(
            f"<li>{html.escape(e.get('status', ''))} {html.escape(e.get('check', ''))}: "
            f"{html.escape(e.get('message', ''))}</li>" for e in log.last) + "</ul>")
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>preflight watch</title>'
            "<style>body{font-family:sans-serif;margin:1.5em;max-width:60em}"
            "td{padding:0 .6em;vertical-align:top;font-size:90%}</style></head><body>"
            + "".join(body) + "</body></html>\n")
