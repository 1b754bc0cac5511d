"""What the checks say: findings with a status, and the verdict they add up to."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, get_args

# --fail-on: what stops the job (warn: warnings too).
FailOn = Literal["fail", "warn"]
FAIL_ON: tuple[FailOn, ...] = get_args(FailOn)


class Status(str, enum.Enum):
    """A finding's status, from best to worst for the verdict."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    COULD_NOT_CHECK = "could-not-check"
    ERROR = "error"  # the check itself crashed: a bug in preflight, never a pass
    # Not applicable: a comparison of hosts on a single host, or facts the user chose not to
    # collect (--no-paddle). Never blocks, never counts as passed.
    SKIP = "skip"


# What stops a job: a failure, a host or fact that could not be checked, a crashed check.
BLOCKING = (Status.FAIL, Status.COULD_NOT_CHECK, Status.ERROR)


@dataclass(frozen=True)
class Finding:
    """One judgement of one check about one or more hosts."""

    check: str
    status: Status
    hosts: tuple[str, ...]
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)
    # What to do about it: its check's fix (docs/checks.md), on a finding that asks for one
    # (a warning, a failure, a host or fact that could not be checked); "" on the others.
    fix: str = ""


EXPLAINED_BY = "explained_by"  # the key of a finding's data that says which finding explains it


@dataclass(frozen=True)
class Explanation:
    """Which finding explains this one: its cause's check and host (a starved CPU explains a
    host's slow links; a neighbour table too small explains ports that time out), and what
    this finding saw, said without the host. The judge folds the finding into its cause's as
    evidence (judge.fold_explained): one fault is one finding, named by its cause. A finding
    carries it in its data under EXPLAINED_BY, as the reports do."""

    check: str
    host: str
    evidence: str

    def as_data(self) -> dict[str, str]:
        return {"check": self.check, "host": self.host, "evidence": self.evidence}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Optional[Explanation]:
        """The explanation a finding's data carries; None where it carries none, or one
        without a check and a host (a report written by hand), which explains nothing."""
        by = data.get(EXPLAINED_BY)
        if not isinstance(by, Mapping):
            return None
        check, host = by.get("check"), by.get("host")
        if not isinstance(check, str) or not isinstance(host, str) or not check or not host:
            return None
        return cls(check, host, str(by.get("evidence") or ""))


# The statuses whose findings carry their check's fix.
NEEDS_FIX = (Status.WARN, Status.FAIL, Status.COULD_NOT_CHECK)


class Verdict(str, enum.Enum):
    GO = "go"
    NO_GO = "no-go"


@dataclass(frozen=True)
class Judgement:
    """The verdict with the findings that decided it."""

    verdict: Verdict
    findings: tuple[Finding, ...]
    reasons: tuple[str, ...]
    waived: tuple[str, ...] = ()  # checks the operator waived (--skip): they did not run
    # Checks that ran and had nothing to judge in this run (no container, one host, no PS
    # job...): {check: when it applies, "" for a check of every run}. Said, so that a short
    # list is not read as all of them.
    not_applicable: Mapping[str, str] = field(default_factory=dict)

    @property
    def crashed_checks(self) -> bool:
        return any(f.status is Status.ERROR for f in self.findings)
