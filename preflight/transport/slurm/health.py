"""preflight health: this node alone, in a few seconds, for Slurm's HealthCheckProgram or a
job prolog, as LBNL NHC is used: one line saying what is wrong (what slurmd logs and the drain
reason shows), exit 0 when healthy and 1 when not, and with --drain the node drained in
Slurm with that reason, or resumed once healthy when preflight was the one that drained it.

What it judges is what one node can say about itself: GPU health (ECC, retired or remapped
pages, slowdowns, busy GPUs, PCIe), the stack's fit with the driver, /dev/shm, temp space,
open-files limit, the launcher's ports, the environment, pins, and Paddle when asked
(--paddle: the import costs about a second). Comparisons with other hosts say n/a."""

from __future__ import annotations

import os

from preflight.common.grouping import group
from preflight.model.findings import BLOCKING, Status, Verdict
from preflight.model.report import Report
from preflight.transport.slurm.drain import (
    Action,
    checks_of,
    drain_actions,
    passed_nodes,
    reason,
    resume_actions,
)
from preflight.transport.slurm.steps import nodes

DEFAULT_DEADLINE_S = 10.0
LINE_MAX = 300  # what slurmd's log and sinfo -R show comfortably


def health_line(report: Report) -> str:
    """'OK: preflight health: ...' or 'ERROR: preflight health: check: what; ...', one line."""
    findings = report.findings
    host = next(iter(report.hosts), "this node")
    if report.verdict is Verdict.GO:
        ran = {f.check for f in findings if f.status is not Status.SKIP}
        warn = sum(1 for f in findings if f.status is Status.WARN)
        return (f"OK: preflight health: {len(ran)} checks passed on {host}"
                + (f" ({warn} warnings)" if warn else ""))
    bad = group(f for f in findings if f.status in BLOCKING)
    text = "; ".join(f"{g.check}: {g.message}" for g in bad) or \
        "; ".join(report.reasons) or "not healthy"
    line = "ERROR: preflight health: " + " ".join(text.split())
    return line if len(line) <= LINE_MAX else line[:LINE_MAX - 3] + "..."


def this_node(given: str | None = None) -> str:
    """The Slurm node this runs on: --node, else slurmd's SLURMD_NODENAME, else the hostname
    (Slurm's NodeHostname)."""
    return given or os.environ.get("SLURMD_NODENAME") or os.uname().nodename


def drain_or_resume(node: str, report: Report, line: str) -> Action | None:
    """The scontrol action that makes Slurm agree with the health verdict of report (None:
    nothing to do). A node preflight drained for what health cannot judge alone (a slow
    link, a failed all-reduce) is left drained: a cluster check has to pass it."""
    states = nodes([node])
    if report.verdict is Verdict.GO:
        ran = next(iter(passed_nodes(report).values()), frozenset())
        acts = resume_actions({node: ran}, states, checks_of(report))
    else:
        why = reason(line.split("preflight health: ", 1)[-1])
        acts = drain_actions({node: why}, states)
    return acts[0] if acts else None
