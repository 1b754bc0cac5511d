"""Findings grouped for people: one line per (check, status, what was found), the hosts as
one compressed hostlist. At 500 hosts one wrong interpreter is one line, not 500.

Checks write a per-host finding as "HOST: what" (one host in its hosts); what follows the
host's name is what is compared. Messages that still differ (a value per host: "12
effective cores", "11 effective cores") fold by their shape, numbers aside, and past
MAX_LINES lines per check and status the smallest groups fold into one line: the summary
says how many variants it folded, the JSON keeps every finding with its values."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from preflight.common.units import hostlist, hosts_text
from preflight.model.findings import Finding

MAX_LINES = 3  # lines one check may take per status in a summary
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


@dataclass(frozen=True)
class Group:
    check: str
    status: str  # a Status value: "fail", "warn", ...
    hosts: tuple[str, ...]  # () for a finding about the cluster as a whole
    what: str  # the message, the host's name taken off when it named one host
    variants: int = 1  # distinct messages folded into this line
    fix: str = ""  # what to do: its check's fix, on a line that asks for one

    def hosts_text(self, limit: int = 0) -> str:
        return hostlist(self.hosts, limit) if self.hosts else "cluster"

    @property
    def message(self) -> str:
        """What was found, and how many variants the line folds."""
        return self.what + (f" (+{self.variants - 1} variants)" if self.variants > 1 else "")

    def text(self, limit: int = 0) -> str:
        """'gpu[001-500]: Paddle not importable ...' (the line a reason is)."""
        head = f"{hostlist(self.hosts, limit)}: " if self.hosts else ""
        return head + self.message


def what_of(hosts: Sequence[str], message: str) -> str:
    """The message without the host names it starts with ("node07: ..." or, for a finding
    about several hosts, "node07, node08: ..." as hosts_text writes them)."""
    for prefix in dict.fromkeys((", ".join(hosts), hosts_text(hosts))):
        if hosts and message.startswith(f"{prefix}: "):
            return message[len(prefix) + 2:]
    return message


def _merge(groups: Sequence[Group], what: str) -> Group:
    hosts = tuple(dict.fromkeys(h for g in groups for h in g.hosts))
    return Group(groups[0].check, groups[0].status, hosts, what,
                 sum(g.variants for g in groups), groups[0].fix)


def _fold(groups: list[Group], max_lines: int) -> list[Group]:
    """One check's groups of one status, at most max_lines of them."""
    if len(groups) <= max_lines:
        return groups
    shapes: dict[str, list[Group]] = {}
    for g in groups:  # the same words with other numbers: one line, the first one's values
        shapes.setdefault(_NUMBER.sub("#", g.what), []).append(g)
    groups = [_merge(gs, gs[0].what) if len(gs) > 1 else gs[0] for gs in shapes.values()]
    if len(groups) <= max_lines:
        return groups
    biggest = sorted(groups, key=lambda g: -len(g.hosts))
    kept, rest = biggest[:max_lines - 1], biggest[max_lines - 1:]
    return [*kept, _merge(rest, rest[0].what)]


def group(findings: Iterable[Finding], max_lines: int = MAX_LINES) -> list[Group]:
    """Groups findings in their order of first appearance; a check's lines of one status
    stay together."""
    exact: dict[tuple[str, str, str, bool], list[str]] = {}
    fixes: dict[tuple[str, str], str] = {}
    for f in findings:
        if f.fix:
            fixes.setdefault((f.check, f.status.value), f.fix)
        hosts, check, status = f.hosts, f.check, f.status.value
        what = what_of(hosts, f.message)
        # A finding naming several hosts at once (a link, a rank pair) keeps its own line.
        single = len(hosts) <= 1
        key = (check, status, what if single else f"{what}\0{','.join(hosts)}", single)
        exact.setdefault(key, []).extend(hosts)
    by_check: dict[tuple[str, str], list[Group]] = {}
    for (check, status, what, _), names in exact.items():
        by_check.setdefault((check, status), []).append(
            Group(check, status, tuple(dict.fromkeys(names)), what.split("\0")[0],
                  fix=fixes.get((check, status), "")))
    return [g for gs in by_check.values() for g in _fold(gs, max_lines)]


def left_out(excluded: Mapping[str, Sequence[str]]) -> list[tuple[list[str], str, int]]:
    """A plan's left-out hosts grouped by their first reason, the host's name taken out of
    it: (hosts, why, how many more reasons the first of them has)."""
    groups: dict[str, tuple[list[str], int]] = {}
    for host, reasons in excluded.items():
        reasons = list(reasons) or ["?"]
        why = _without_host(reasons[0], host)
        hosts, _ = groups.setdefault(why, ([], len(reasons) - 1))
        hosts.append(host)
    return [(hosts, why, more) for why, (hosts, more) in groups.items()]


def _without_host(reason: str, host: str) -> str:
    """A reason ("check: host: message") without the host's name leading its message; a
    name within it stays ("bandwidth: a -> b: slow path" left out for b says the path)."""
    check, sep, message = reason.partition(": ")
    if reason.startswith(f"{host}: "):
        return reason[len(host) + 2:]
    if sep and message.startswith(f"{host}: "):
        return f"{check}: {message[len(host) + 2:]}"
    return reason
