"""Runs the checks over the collected facts and turns the findings into a verdict."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from preflight.checks import ALL_CHECKS, CheckSpec
from preflight.common.grouping import group
from preflight.common.units import hostlist
from preflight.model.cluster import Cluster
from preflight.model.findings import (
    BLOCKING,
    NEEDS_FIX,
    Explanation,
    FailOn,
    Finding,
    Judgement,
    Status,
    Verdict,
)
from preflight.model.plan import Plan
from preflight.model.report import Report


def run_checks(cluster: Cluster, specs: Sequence[CheckSpec] = ALL_CHECKS) -> list[Finding]:
    """Returns every check's findings; a check that raises becomes one ERROR finding. On a
    single probed host, a check that compares hosts says "n/a", not that they agree."""
    findings: list[Finding] = []
    probed = [name for name, _ in cluster.probed()]
    for spec in specs:
        try:
            found = list(spec.run(cluster))
            if spec.across and len(probed) == 1:
                found = _not_applicable(spec, probed[0], found)
            findings.extend(replace(f, fix=f.fix or spec.fix) if f.status in NEEDS_FIX else f
                            for f in found)
        except Exception as e:  # a bug in one check must not hide the others' findings
            where = traceback.extract_tb(e.__traceback__)[-1]
            findings.append(Finding(
                spec.name, Status.ERROR, (),
                f"check {spec.name} crashed: {type(e).__name__}: {e} "
                f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
                {"exception": type(e).__name__}))
    return fold_explained(findings)


WORSE = (Status.PASS, Status.WARN, Status.FAIL)


def fold_explained(findings: Sequence[Finding]) -> list[Finding]:
    """Folds each finding that another explains (its Explanation: a check and a host, e.g.
    a slow link that the host's starved CPU explains) into that finding as its evidence: one
    fault is one finding, named by its cause, with the worse of the two statuses. A symptom
    whose cause found nothing (or was waived) stands as it is."""
    causes: dict[tuple[str, str], int] = {}
    for i, f in enumerate(findings):
        if f.status in (Status.WARN, Status.FAIL) and Explanation.of(f.data) is None:
            for h in f.hosts:  # a shared cause (one table of several hosts) names each
                causes.setdefault((f.check, h), i)
    out: list[Optional[Finding]] = list(findings)
    said: set[tuple[int, str]] = set()  # (cause, symptom's check): its words said once
    for i, f in enumerate(findings):
        by = Explanation.of(f.data)
        if by is None or f.status not in (Status.WARN, Status.FAIL):
            continue
        at = causes.get((by.check, by.host))
        cause = out[at] if at is not None else None
        if cause is None or at is None:
            continue
        status = max(cause.status, f.status, key=WORSE.index)
        evidence = [*cause.data.get("evidence", ()), {
            "check": f.check, "status": f.status.value, "hosts": list(f.hosts),
            "message": f.message}]
        message = cause.message if (at, f.check) in said else \
            f"{cause.message}; it explains what {f.check} saw: {by.evidence}"
        said.add((at, f.check))
        out[at] = replace(cause, status=status, message=message,
                          data={**cause.data, "evidence": evidence})
        out[i] = None
    return [f for f in out if f is not None]


def _not_applicable(spec: CheckSpec, host: str, found: Sequence[Finding]) -> list[Finding]:
    """A comparing check's findings on one host: its passes become one "n/a" (a host agrees
    with itself), and so do its could-not-checks (what it could not read, or which interface
    to compare, there is nothing to compare with); what it found wrong stands."""
    rest = [f for f in found if f.status not in (Status.PASS, Status.COULD_NOT_CHECK)]
    if len(rest) == len(found):
        return rest
    return rest + [Finding(spec.name, Status.SKIP, (host,),
                           f"{host}: n/a on one host (compares hosts)", {})]


def blocking_statuses(fail_on: FailOn = "fail") -> tuple[Status, ...]:
    """Returns the statuses that make NO-GO under --fail-on (a CI gate may refuse warnings)."""
    return BLOCKING + ((Status.WARN,) if fail_on == "warn" else ())


def rejudged(report: Report, fail_on: FailOn) -> Report:
    """Returns a saved report judged again under fail_on (preflight report --fail-on): what
    blocks under the new rule and did not under the report's own adds to the reasons."""
    newly_blocking = set(blocking_statuses(fail_on)) - set(blocking_statuses(
        report.fail_on or "fail"))
    newly = [g.text() for g in group(f for f in report.findings if f.status in newly_blocking)]
    if newly:
        report = replace(report, verdict=Verdict.NO_GO, reasons=report.reasons + tuple(newly))
    return replace(report, fail_on=fail_on)


def judge(cluster: Cluster, findings: Sequence[Finding], plan: Optional[Plan] = None,
          fail_on: FailOn = "fail", waived: Sequence[str] = ()) -> Judgement:
    """Returns GO only when no finding blocks and every host was checked.

    When the job is sized (--nnodes, --server-num, --trainer-num), the question is whether
    that job fits: findings about hosts the plan left out no longer block, and the plan must
    fit. A finding that names no host (or a crashed check) always blocks. With fail_on
    "warn", warnings block too. Waived checks did not run; the judgement names them."""
    blocking = [f for f in findings if f.status in blocking_statuses(fail_on)]
    sized = plan is not None and plan.shape.explicit
    if sized:
        assert plan is not None
        used = set(plan.hosts())
        blocking = [f for f in blocking if f.status is Status.ERROR or not f.hosts
                    or used & set(f.hosts)]
    # One reason per thing found, its hosts compressed: 500 hosts with one fault are one.
    reasons = [g.text() for g in group(blocking)]
    unchecked = [o.host.name for o in cluster.outcomes if not o.ok]
    if unchecked and not sized and not any(f.status is Status.COULD_NOT_CHECK
                                           for f in findings):
        reasons.append(f"not checked: {hostlist(unchecked)}")  # never a silent pass
    if not cluster.outcomes:
        reasons.append("no hosts to check")
    if plan is not None and cluster.outcomes:
        reasons.extend(f"plan: {why}" for why in plan.lacks)
        if not plan.nodes and not plan.lacks:
            reasons.append("plan: no host fits the job")
    verdict = Verdict.NO_GO if reasons else Verdict.GO
    said = {f.check for f in findings}
    idle = {c.name: c.applies for c in ALL_CHECKS
            if c.name not in said and c.name not in waived}
    return Judgement(verdict, tuple(findings), tuple(reasons), tuple(waived), idle)
