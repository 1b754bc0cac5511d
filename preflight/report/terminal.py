"""Terminal output: live progress while hosts answer, then the findings and the verdict."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from typing import Optional, TextIO

from preflight.model.findings import Finding, Judgement, Status, Verdict
from preflight.model.host import HostOutcome
from preflight.model.plan import Plan
from preflight.report.summary import cost_text
from preflight.report.units import hosts_text, port_ranges

ORDER = {Status.ERROR: 0, Status.FAIL: 1, Status.COULD_NOT_CHECK: 2, Status.WARN: 3,
         Status.PASS: 4}
COLORS = {Status.ERROR: "31", Status.FAIL: "31", Status.COULD_NOT_CHECK: "35",
          Status.WARN: "33", Status.PASS: "32"}


class Progress:
    """A one-line live count on a TTY; silent otherwise (logs and CI stay clean)."""

    def __init__(self, stream: TextIO = sys.stderr, enabled: bool | None = None) -> None:
        self.stream = stream
        # A dumb terminal cannot take the carriage-return-and-erase this redraws with.
        self.enabled = (stream.isatty() and os.environ.get("TERM") != "dumb") \
            if enabled is None else enabled
        self.failed = 0

    def __call__(self, outcome: HostOutcome, done: int, total: int) -> None:
        if not outcome.ok:
            self.failed += 1
        if self.enabled:
            self.stream.write(f"\r\033[Kprobing hosts: {done}/{total} answered"
                              + (f", {self.failed} could not be checked" if self.failed else ""))
            self.stream.flush()

    def step(self, text: str) -> None:
        """Shows what the active tests are doing now."""
        if self.enabled:
            self.stream.write(f"\r\033[K{text}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _hosts_cell(hosts: tuple[str, ...]) -> str:
    """A short hosts column: the names when few, else a count (the message names them)."""
    return hosts_text(list(hosts)) if len(hosts) <= 3 else f"{len(hosts)} hosts"


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


def _paint(text: str, status: Status, color: bool) -> str:
    return f"\033[{COLORS[status]}m{text}\033[0m" if color else text


def render(judgement: Judgement, color: bool = False, width: int | None = None,
           plan: Optional[Plan] = None) -> str:
    """Returns the findings table (worst first), the plan and the one-line verdict."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    findings: list[Finding] = sorted(judgement.findings, key=lambda f: ORDER[f.status])
    rows = [(f.status.value, f.check, _hosts_cell(f.hosts), f.message) for f in findings]
    w0 = max([len("STATUS")] + [len(r[0]) for r in rows])
    w1 = max([len("CHECK")] + [len(r[1]) for r in rows])
    w2 = min(30, max([len("HOSTS")] + [len(r[2]) for r in rows]))
    lines = [f"{'STATUS':<{w0}}  {'CHECK':<{w1}}  {'HOSTS':<{w2}}  MESSAGE"]
    for f, (st, check, hosts, msg) in zip(findings, rows):
        if len(hosts) > w2:
            hosts = hosts[: w2 - 3] + "..."
        lines.append(f"{_paint(f'{st:<{w0}}', f.status, color)}  {check:<{w1}}  "
                     f"{hosts:<{w2}}  {msg}")
    if judgement.waived:
        lines.append(f"WAIVED (not run, --skip): {', '.join(judgement.waived)}")
    lines.append("")
    if plan is not None:
        lines.extend(plan_lines(plan))
        lines.append("")
    lines.append(verdict_line(judgement, color, plan))
    return "\n".join(lines) + "\n"


def plan_lines(plan: Plan) -> list[str]:
    """Returns the plan: one line per host it uses, then the hosts it left out and why."""
    if plan.mode == "collective":
        head = (f"PLAN collective: {len(plan.nodes)} worker hosts x {plan.nproc_per_node} "
                f"ranks, master {plan.master}")
    else:
        head = f"PLAN ps: {len(plan.servers)} servers, {len(plan.workers)} trainers"
    out = [head + ("" if plan.fits else f" -- lacks: {'; '.join(plan.lacks)}")]
    for n in plan.nodes:
        if plan.mode == "collective":
            what = f"rank {n.rank}, {n.nproc} process(es)"
        else:
            roles = [f"server {e}" for e in plan.servers if e.host == n.host] + \
                    [f"trainer {e}" for e in plan.workers if e.host == n.host]
            what = ", ".join(roles)
        out.append(f"  {n.host}  {n.address}  {what}  ports {port_ranges(n.ports)}")
    out.extend(f"  note: {x}" for x in plan.notes)
    for host, reasons in plan.excluded.items():
        out.append(f"  left out {host}: {reasons[0]}"
                   + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""))
        cost = plan.costs.get(host)
        if cost is not None:
            out.append("    " + cost_text(cost.nbytes, cost.with_s, cost.without_s, cost.basis))
    return out


def verdict_line(judgement: Judgement, color: bool = False, plan: Optional[Plan] = None,
                 ) -> str:
    counts = {s: sum(1 for f in judgement.findings if f.status is s) for s in Status}
    if judgement.verdict is Verdict.GO:
        warn = f" ({counts[Status.WARN]} warnings)" if counts[Status.WARN] else ""
        head = _paint("GO", Status.PASS, color)
        if plan is not None and plan.excluded and plan.shape.explicit:
            return (f"{head}: the job fits on {len(plan.nodes)} hosts ({len(plan.excluded)} "
                    f"left out: {hosts_text(list(plan.excluded))}){warn}")
        checks = len({f.check for f in judgement.findings})
        waived = f", {len(judgement.waived)} waived" if judgement.waived else ""
        return f"{head}: all {checks} checks passed{warn}{waived}"
    parts = [f"{counts[s]} {label}" for s, label in (
        (Status.FAIL, "failed"), (Status.COULD_NOT_CHECK, "could not check"),
        (Status.ERROR, "check errors")) if counts[s]]
    head = _paint("NO-GO", Status.FAIL, color)
    reasons = "; ".join(judgement.reasons[:3])
    more = f"; ... (+{len(judgement.reasons) - 3} more)" if len(judgement.reasons) > 3 else ""
    return f"{head}: {', '.join(parts) or 'blocked'}: {reasons}{more}"
