"""Acting on a verdict where Slurm can: drain the nodes a report failed, with the finding as
Slurm's reason ("preflight: cpu-cores: 0.25 effective cores ..."), and resume the nodes a
later report passes, but only those whose drain reason preflight wrote (a node an operator
drained for maintenance is never touched) and only once the check the reason names ran again
on the node and passed: a report that never measured bandwidth does not return a node drained
for a slow link. Both are idempotent (a node already in the wanted state is left as it is)
and print the scontrol command lines they run, or would run.

Commands are argument lists, never a shell line: a finding's text cannot reach a shell."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.common.grouping import what_of
from preflight.common.secrets import hide
from preflight.model.findings import BLOCKING, Status
from preflight.model.report import Report
from preflight.transport.slurm.steps import PREFLIGHT_REASON, Node, SlurmError, nodes

PREFIX = PREFLIGHT_REASON  # how a drain reason says preflight wrote it
REASON_MAX = 200  # characters of a reason (sinfo -R shows it on one line)
PASSING = (Status.PASS, Status.WARN)
# A check's name where a reason (or one of its "; "-separated parts) starts: "cpu-cores: ".
_CHECK_AT = re.compile(r"(?:^|; )([a-z][a-z0-9_-]*): ")


@dataclass(frozen=True)
class Action:
    node: str
    command: Optional[tuple[str, ...]]  # None: nothing to do (why says so)
    why: str

    def line(self) -> str:
        return shlex.join(self.command) if self.command else f"# {self.node}: {self.why}"


def failed_nodes(report: Report) -> dict[str, str]:
    """{node: the reason to drain it} for every host the report found a blocking fault on:
    the first such finding naming it, its check first. Hosts Slurm itself would not run a
    step on (already down or drained) and findings about the cluster as a whole are not
    reasons to drain anyone."""
    out: dict[str, str] = {}
    for f in report.findings:
        if f.status not in BLOCKING:
            continue
        for host in f.hosts:
            entry = report.hosts.get(host)
            failure = entry.failure if entry is not None else None
            if (failure is not None and failure.stage == "slurm") or host in out:
                continue
            out[host] = reason(f"{f.check}: {what_of([host], f.message)}")
    return out


def passed_nodes(report: Report) -> dict[str, frozenset[str]]:
    """{host: the checks that ran on it and passed} for the hosts the report checked and
    found nothing blocking on (a warning passes; a skip, such as --no-paddle's, did not run)."""
    bad = {h for f in report.findings if f.status in BLOCKING for h in f.hosts}
    ran: dict[str, set[str]] = {}
    for f in report.findings:
        if f.status in PASSING:
            for h in f.hosts:
                ran.setdefault(h, set()).add(f.check)
    return {h: frozenset(ran.get(h, ())) for h, entry in report.hosts.items()
            if entry.ok and h not in bad}


def checks_of(report: Report) -> frozenset[str]:
    """The checks a report has findings of (every check that it ran or skipped)."""
    return frozenset(f.check for f in report.findings)


def drained_for(why: str, checks: Collection[str]) -> tuple[str, ...]:
    """The checks a preflight drain reason names: "preflight: CHECK: what", and more parts
    "; CHECK: what" as `preflight health` writes them, where CHECK is one of checks (a
    message's own "; host: ..." is not a check)."""
    if not why.startswith(PREFIX):
        return ()
    found = [m.group(1) for m in _CHECK_AT.finditer(why[len(PREFIX):])]
    return tuple(dict.fromkeys(c for i, c in enumerate(found) if i == 0 or c in checks))


def reason(text: str) -> str:
    """A drain reason: one line, prefixed, bounded."""
    one = " ".join(text.split())
    full = PREFIX + one
    return full if len(full) <= REASON_MAX else full[:REASON_MAX - 3] + "..."


def _drained(node: Node) -> bool:
    return node.base_state.startswith("drain")  # drain, drained, draining


def drain_actions(failed: Mapping[str, str], states: Mapping[str, Node]) -> list[Action]:
    out = []
    for name, said in failed.items():
        why = hide(said)  # a node's reason is shown to every user of the cluster (sinfo -R)
        node = states.get(name)
        if node is None:
            out.append(Action(name, None, "not a Slurm node: left alone"))
        elif _drained(node) and node.reason == why:
            out.append(Action(name, None, "already drained for this reason"))
        elif _drained(node) and not node.reason.startswith(PREFIX):
            out.append(Action(name, None, f"drained by someone else ({node.reason}): left "
                                          "alone"))
        else:
            out.append(Action(name, ("scontrol", "update", f"nodename={name}", "state=drain",
                                     f"reason={why}"), why))
    return out


def resume_actions(passed: Mapping[str, frozenset[str]], states: Mapping[str, Node],
                   checks: Collection[str] = ()) -> list[Action]:
    """passed: passed_nodes' {node: the checks that ran on it and passed}; checks: every
    check the report knows (checks_of)."""
    out = []
    for name, ran in passed.items():
        node = states.get(name)
        if node is None or not _drained(node):
            continue  # nothing to resume
        if not node.reason.startswith(PREFIX):
            out.append(Action(name, None, f"drained by someone else ({node.reason}): left "
                                          "alone"))
            continue
        unchecked = [c for c in drained_for(node.reason, checks) if c not in ran]
        if unchecked:
            out.append(Action(name, None, f"drained for {', '.join(unchecked)}, which this "
                              f"report did not pass on it: left drained ({node.reason})"))
        else:
            out.append(Action(name, ("scontrol", "update", f"nodename={name}",
                                     "state=resume"), f"passes again (was: {node.reason})"))
    return out


def plan(report: Report, resume: bool) -> list[Action]:
    """What drain (resume False) or resume would do for a report, from Slurm's current
    view of its nodes."""
    names = list(report.hosts)
    states = nodes(names) if names else {}
    if resume:
        return resume_actions(passed_nodes(report), states, checks_of(report))
    return drain_actions(failed_nodes(report), states)


def unasked(report: Report, resume: bool) -> list[Action]:
    """What drain or resume would run with no word from Slurm (a dry run where no Slurm
    client answers): every failed node drained, every passing node resumed."""
    if resume:
        return [Action(name, ("scontrol", "update", f"nodename={name}", "state=resume"),
                       "passes (resumed only where preflight drained it)")
                for name in passed_nodes(report)]
    hidden = {name: hide(why) for name, why in failed_nodes(report).items()}
    return [Action(name, ("scontrol", "update", f"nodename={name}", "state=drain",
                          f"reason={why}"), why) for name, why in hidden.items()]


def apply(actions: Sequence[Action], timeout: float = 30.0) -> None:
    """Runs each action's scontrol; raises SlurmError (one line) at the first refusal."""
    for a in actions:
        if a.command is None:
            continue
        try:
            p = subprocess.run(list(a.command), capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SlurmError(f"scontrol for {a.node}: {e}") from None
        if p.returncode != 0:
            why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
            hint = (" (draining and resuming nodes needs a Slurm operator or administrator)"
                    if "denied" in why.lower() or "invalid user" in why.lower() else "")
            raise SlurmError(f"scontrol refused {a.node}: {why}{hint}")


def drain_now(why: Mapping[str, str], timeout: float = 10.0) -> list[str]:
    """Drains the hosts ({host: the reason's text}) that are Slurm nodes (watch --act);
    returns a line for each, or one line saying why none was drained (no Slurm here, or it
    refused). Never raises: the caller goes on with its other steps."""
    if shutil.which("sinfo") is None:
        return ["not drained: no Slurm here (no sinfo on this machine)"]
    try:
        actions = drain_actions({h: reason(w) for h, w in why.items()},
                                nodes(list(why), timeout))
        apply(actions, timeout)
    except SlurmError as e:
        return [f"not drained: {e}"]
    return [a.line() if a.command else f"{a.node}: {a.why}" for a in actions]
