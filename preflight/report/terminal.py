"""Terminal output: live progress while hosts answer, then the findings (grouped: one line
per thing found, its hosts compressed), the plan and the verdict, cut to the terminal's
width. It renders the report as decoded from its JSON, so `preflight report FILE` shows a
saved run the same."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Mapping
from typing import Optional, TextIO

from preflight.common.grouping import group, left_out
from preflight.common.summary import applies_when, cost_of, sorted_findings
from preflight.common.units import hostlist, port_ranges
from preflight.common.visible import visible
from preflight.model.findings import Status, Verdict
from preflight.model.host import HostOutcome
from preflight.model.report import PlanEntry, Report
from preflight.report.machine import facts_lines

ORDER = {Status.ERROR: 0, Status.FAIL: 1, Status.COULD_NOT_CHECK: 2, Status.WARN: 3,
         Status.PASS: 4, Status.SKIP: 5}
COLORS = {Status.ERROR: "31", Status.FAIL: "31", Status.COULD_NOT_CHECK: "35",
          Status.WARN: "33", Status.PASS: "32", Status.SKIP: "2"}


BAR_W = 20  # the bar's cells


def bar(text: str, done: int, total: int, elapsed_s: float, width: int) -> str:
    """One line of progress: 'iperf3 ring ... [#######-------------] 12/32  5 s', at most
    width columns (a line longer than the terminal wraps, and \\r no longer redraws it)."""
    filled = BAR_W * min(done, total) // total if total > 0 else 0
    tail = (f" [{'#' * filled}{'-' * (BAR_W - filled)}] {done}/{total}" if total > 0 else "")
    tail += f"  {elapsed_s:.0f} s"
    return fit(text, max(10, width - len(tail) - 1)) + tail


class Progress:
    """A live progress bar on a TTY for the long phases (probing hosts, iperf3 rounds, the
    all-reduce), redrawn in place; silent otherwise (logs and CI stay clean)."""

    def __init__(self, stream: TextIO = sys.stderr, enabled: bool | None = None) -> None:
        self.stream = stream
        # A dumb terminal cannot take the carriage-return-and-erase this redraws with.
        self.enabled = (stream.isatty() and os.environ.get("TERM") != "dumb") \
            if enabled is None else enabled
        self.failed = 0
        self._phase, self._since = "", time.monotonic()

    def _draw(self, text: str, done: int, total: int, phase: str) -> None:
        if phase != self._phase:  # a new phase: its clock starts now
            self._phase, self._since = phase, time.monotonic()
        if self.enabled:
            width = width_of(self.stream)
            self.stream.write("\r\033[K" + bar(text, done, total,
                                                 time.monotonic() - self._since, width - 1))
            self.stream.flush()

    def __call__(self, outcome: HostOutcome, done: int, total: int) -> None:
        if not outcome.ok:
            self.failed += 1
        text = "probing hosts" + (f" ({self.failed} could not be checked)" if self.failed
                                  else "")
        self._draw(text, done, total, "probe")

    def step(self, text: str, done: int = 0, total: int = 0) -> None:
        """Shows what the active tests are doing now, and how far they got (total 0: no
        count to show)."""
        self._draw(text, done, total, text)

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()


COLOR_CHOICES = ("auto", "always", "never")


def use_color(choice: str, stream: TextIO, env: Optional[Mapping[str, str]] = None) -> bool:
    """Whether to colour output: --color always/never decide; auto colours a terminal only,
    never with NO_COLOR set to anything (no-color.org) or TERM=dumb."""
    env = os.environ if env is None else env
    if choice in ("always", "never"):
        return choice == "always"
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def width_of(stream: TextIO) -> int:
    """The columns to fit: a terminal's (COLUMNS wins, as the shell sets it); 0, no limit, for
    a file, a pipe or a CI log, whose reader scrolls or greps whole lines (a COLUMNS that a
    tool exported to its children does not cut them)."""
    try:
        if stream.isatty():
            return shutil.get_terminal_size((120, 24)).columns
    except (AttributeError, ValueError):
        pass
    return 0


def _paint(text: str, status: Status, color: bool) -> str:
    return f"\033[{COLORS[status]}m{text}\033[0m" if color else text


HOSTS_W = 26  # the hosts column: a compressed hostlist, counted when cut
PLAN_NODES = 6  # plan lines for the hosts it uses; the rest are counted (all in -v)
ELLIPSIS = "..."


def fit(text: str, width: int) -> str:
    """Cuts text to width columns (0: no limit), marking the cut."""
    if width <= 0 or len(text) <= width:
        return text
    return text[:max(0, width - len(ELLIPSIS))] + ELLIPSIS


def _status_of(value: str) -> Status:
    if value == "n/a":
        return Status.SKIP
    try:
        return Status(value)
    except ValueError:
        return Status.ERROR


def render(report: Report, color: bool = False, width: int | None = None,
           detail: bool = False) -> str:
    """Returns the findings (grouped, worst first), the plan and the one-line verdict of a
    report, every line cut to width; detail adds every finding in full."""
    width = shutil.get_terminal_size((120, 24)).columns if width is None else width
    groups = sorted(group(sorted_findings(report)), key=lambda g: ORDER[_status_of(g.status)])
    # "n/a" reads better than the JSON's "skip"; the other statuses print as the JSON has them.
    # What hosts said is shown terminal-safe (common/visible.py): a newline or an escape in a
    # fact or a log line would act on the terminal, forging lines after the real verdict.
    rows = [("n/a" if g.status == "skip" else g.status, g.check, g.hosts_text(HOSTS_W),
             visible(g.message)) for g in groups]
    w0 = max([len("STATUS")] + [len(r[0]) for r in rows])
    w1 = max([len("CHECK")] + [len(r[1]) for r in rows])
    w2 = min(HOSTS_W, max([len("HOSTS")] + [len(r[2]) for r in rows]))
    lines = [fit(f"{'STATUS':<{w0}}  {'CHECK':<{w1}}  {'HOSTS':<{w2}}  MESSAGE", width)]
    if report.local and len(report.hosts) == 1:  # a machine audited alone: its facts first
        name, host = next(iter(report.hosts.items()))
        lines[:0] = [fit(visible(ln), width) for ln in facts_lines(name, host)] + [""]
    for st, check, hosts, msg in rows:
        text = fit(f"{st:<{w0}}  {check:<{w1}}  {fit(hosts, w2):<{w2}}  {msg}", width)
        lines.append(_paint(text[:w0], _status_of(st), color) + text[w0:])
    if report.waived:
        lines.append(fit(f"WAIVED (not run, --skip): {', '.join(report.waived)}", width))
    if report.not_applicable:
        lines.append(fit(f"N/A (nothing to judge in this run; -v says when each applies): "
                         f"{', '.join(report.not_applicable)}", width))
    if report.rechecked_over_ssh:
        lines.append(fit("RE-CHECKED OVER SSH (drained by preflight: Slurm runs no step "
                         f"there): {', '.join(report.rechecked_over_ssh)}", width))
    if detail:
        lines += ["", "DETAILS (every finding in full)"]
        said = ""
        for f in sorted_findings(report):
            if f.status is Status.PASS:
                continue
            lines.append(f"  {f.status.value}  {f.check}  {visible(f.message)}")
            if f.fix and f.fix != said:  # once for a run of findings that share it
                lines.append(f"    fix: {visible(f.fix)}")
            said = f.fix
        lines += [f"  n/a  {name}  {applies_when(when)}"
                  for name, when in report.not_applicable.items()]
    lines.append("")
    if report.plan is not None:
        lines.extend(fit(visible(ln), width) for ln in plan_lines(report.plan, detail))
        lines.append("")
    lines.append(verdict_line(report, color, width))
    return "\n".join(lines) + "\n"


def plan_lines(plan: PlanEntry, detail: bool = False) -> list[str]:
    """Returns the plan: the hosts it uses (the first few, all with detail), then the hosts
    it left out, grouped by why."""
    nodes = plan.nodes
    if plan.mode == "ps":
        head = f"PLAN ps: {len(plan.servers)} servers, {len(plan.workers)} trainers"
    else:
        master = f", master {plan.master}" if plan.master else ""
        head = (f"PLAN collective: {len(nodes)} worker hosts x "
                f"{plan.nproc_per_node or 1} ranks{master}")
    out = [head + ("" if plan.fits is not False else f" -- lacks: {'; '.join(plan.lacks)}")]
    shown = nodes if detail or len(nodes) <= PLAN_NODES else nodes[:PLAN_NODES - 1]
    for n in shown:
        if plan.mode == "ps":
            what = ", ".join([f"server {e.endpoint}" for e in plan.servers if e.host == n.host]
                             + [f"trainer {e.endpoint}" for e in plan.workers
                                if e.host == n.host])
        else:
            what = f"rank {n.rank}, {n.nproc} process(es)"
        out.append(f"  {n.host}  {n.address}  {what}  ports {port_ranges(n.ports)}")
    if len(shown) < len(nodes):
        rest = [n.host for n in nodes[len(shown):]]
        out.append(f"  ... and {len(rest)} more: {hostlist(rest, 60)} (all in the JSON "
                   "report, -v, --emit-launch)")
    out.extend(f"  note: {x}" for x in plan.notes)
    for hosts, why, more in left_out(plan.excluded):
        out.append(f"  left out {hostlist(hosts, HOSTS_W + 14)}: {why}"
                   + (f" (+{more} more)" if more else ""))
        cost = cost_of(plan, hosts[0]) if len(hosts) == 1 else None
        if cost:
            out.append("    " + cost)
    return out


def verdict_line(report: Report, color: bool = False, width: int = 0) -> str:
    """The verdict in one line, at most width columns: GO with what passed, or NO-GO with
    counts and the first reasons (all of them are in the report)."""
    findings = sorted_findings(report)
    counts = {s: sum(1 for f in findings if f.status is s) for s in Status}
    plan = report.plan
    if report.verdict is Verdict.GO:
        warn = f" ({counts[Status.WARN]} warnings)" if counts[Status.WARN] else ""
        head = _paint("GO", Status.PASS, color)
        if plan is not None and plan.excluded and plan.requested is not None \
                and plan.requested.explicit:
            left = list(plan.excluded)
            text = (f": the job fits on {len(plan.nodes)} hosts ({len(left)} "
                    f"left out: {hostlist(left, 40)}){warn}")
        else:
            # A check that only said "n/a" (one host, --no-paddle) did not pass anything.
            ran = {f.check for f in findings if f.status is not Status.SKIP}
            checks = len(ran)
            na = len({f.check for f in findings if f.status is Status.SKIP} - ran)
            text = (f": all {checks} checks passed{warn}"
                    + (f", {na} n/a" if na else "")
                    + (f", {len(report.waived)} waived" if report.waived else ""))
        return head + fit(text, width - 2 if width else 0)
    # Counted as the summary shows them: things found (grouped) and the hosts they name.
    groups = group(findings)
    parts = []
    for s, label in ((Status.FAIL, "failed"), (Status.COULD_NOT_CHECK, "could not check"),
                     (Status.ERROR, "check errors")):
        mine = [g for g in groups if g.status == s.value]
        hosts = {h for g in mine for h in g.hosts}
        if mine:
            parts.append(f"{len(mine)} {label}" + (f" on {len(hosts)} hosts" if len(hosts) > 1
                                                    else ""))
    if report.fail_on == "warn" and counts[Status.WARN]:
        parts.append(f"{counts[Status.WARN]} warnings (--fail-on warn)")
    reasons = report.reasons
    text = f": {', '.join(parts) or 'blocked'}: " + "; ".join(visible(r) for r in reasons[:3])
    if len(reasons) > 3:
        text += f"; ... (+{len(reasons) - 3} more)"
    return _paint("NO-GO", Status.FAIL, color) + fit(text, width - 5 if width else 0)
