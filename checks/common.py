"""Helpers shared by the checks: pick a section across hosts, compare values, word findings."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Optional, TypeVar, Union

from preflight.common.units import hosts_text
from preflight.model.cluster import Cluster
from preflight.model.container import traits
from preflight.model.facts import (
    PADDLE_NOT_REQUESTED,
    ContainerFacts,
    EnvFacts,
    HostFacts,
    Interface,
    LimitsFacts,
    NetworkFacts,
    SectionError,
    ShmFacts,
)
from preflight.model.findings import Explanation, Finding, Status

T = TypeVar("T")
MIB = 1 << 20


def sections(cluster: Cluster, pick: Callable[[HostFacts], Any],
             kind: type[T]) -> tuple[dict[str, T], dict[str, str]]:
    """Returns ({host: section} for hosts that have it, {host: why not} for the others)."""
    have: dict[str, T] = {}
    missing: dict[str, str] = {}
    for name, facts in cluster.probed():
        sec = pick(facts)
        if isinstance(sec, kind):
            have[name] = sec
        elif isinstance(sec, SectionError):
            missing[name] = sec.message
        else:
            missing[name] = f"unexpected {type(sec).__name__}"
    return have, missing


def _not_read(c: ContainerFacts) -> SectionError:
    why = (c.no_runtime or c.missing or (c.error and f"did not start: {c.error}") or c.unread
           or "its process was not read")
    return SectionError(f"the job's {c.subject}: {why}")




def _job_section(f: HostFacts, host: Any, pick: Callable[[ContainerFacts], Any]) -> Any:
    """What the job runs with: its container's (pick) where it runs in one and the
    container is read, the host's (host) where it runs on the host or shares the host's."""
    c = f.container
    if c is None or isinstance(c, SectionError):
        return host if c is None else c
    if traits(c.runtime).host_shared:  # its IPC and limits are the host's
        return host
    got = pick(c)
    return got if got is not None else _not_read(c)


def job_shm(f: HostFacts) -> Union[ShmFacts, SectionError]:
    """The /dev/shm the job gets: its container's where it runs in one, else the host's."""
    return _job_section(f, f.shm, lambda c: c.shm)  # type: ignore[no-any-return]


def job_limits(f: HostFacts) -> Union[LimitsFacts, SectionError]:
    """The limits the job runs with: its container's where it runs in one, else the host's."""
    return _job_section(f, f.limits, lambda c: c.limits)  # type: ignore[no-any-return]


def job_env(f: HostFacts) -> Union[EnvFacts, SectionError]:
    """The training variables the job gets: its container's process's (the image's ENV and
    the run's --env; not the login shell's, which a container does not inherit) where it
    runs in one, else the host's login environment."""
    return _job_section(f, f.env, lambda c: c.env)  # type: ignore[no-any-return]


def in_container(f: HostFacts) -> bool:
    return f.container is not None


def read_containers(cluster: Cluster) -> list[tuple[str, ContainerFacts, HostFacts]]:
    """(host, its job's container, its facts) where the container started and was read
    (the container check speaks of the others)."""
    return [(h, f.container, f) for h, f in cluster.probed()
            if isinstance(f.container, ContainerFacts) and f.container.host_network is not None]


def job_interfaces(check: str, cluster: Cluster,
                   ) -> tuple[dict[str, Optional[Interface]], list[Finding]]:
    """Returns each probed host's job interface (None: no interface holds its address and
    there is no default route) and a could-not-check finding per host without network
    facts."""
    nets, missing = sections(cluster, lambda f: f.network, NetworkFacts)
    addresses = {o.host.name: o.host.address for o in cluster.outcomes}
    return ({h: net.job_interface(addresses[h]) for h, net in nets.items()},
            could_not_check(check, "network facts", missing))


def could_not_check(check: str, what: str, missing: dict[str, str]) -> list[Finding]:
    """Returns one could-not-check finding per host whose facts were missing; facts the user
    chose not to collect (--no-paddle) are "not requested" instead, and block nothing."""
    return [Finding(check, Status.SKIP, (host,), f"{host}: {what} not requested (--no-paddle)",
                    {"reason": why}) if why == PADDLE_NOT_REQUESTED else
            Finding(check, Status.COULD_NOT_CHECK, (host,),
                    f"{host}: could not read {what}: {why}", {"reason": why})
            for host, why in missing.items()]


def compare(check: str, label: str, values: Mapping[str, Hashable],
            status: Status = Status.FAIL, show: Callable[[Any], str] = str) -> list[Finding]:
    """Returns findings for hosts whose value differs from the majority (none if all agree).

    With a clear majority: 'node07: paddle 3.2.2 != 3.3.1 (5 of 6 hosts)', one finding per
    deviating value. With no majority, one finding that lists every value and its hosts."""
    if not values:
        return []
    counts = Counter(values.values())
    if len(counts) == 1:
        return []
    ranked = counts.most_common()
    total = len(values)
    groups: dict[Hashable, list[str]] = {}
    for host, v in values.items():
        groups.setdefault(v, []).append(host)
    if ranked[0][1] == ranked[1][1]:
        parts = [f"{show(v)} on {hosts_text(groups[v])}" for v, _ in ranked]
        return [Finding(check, status, tuple(values), f"{label} differs with no majority: "
                        + "; ".join(parts), {"values": {h: show(v) for h, v in values.items()}})]
    majority, n = ranked[0]
    out = []
    for v, _ in ranked[1:]:
        hosts = groups[v]
        out.append(Finding(
            check, status, tuple(hosts),
            f"{hosts_text(hosts)}: {label} {show(v)} != {show(majority)} ({n} of {total} hosts)",
            {"field": label, "value": show(v), "majority": show(majority),
             "majority_hosts": n, "hosts_total": total}))
    return out


def passed(check: str, hosts: Iterable[str], message: str, **data: Any) -> Finding:
    # Checks count "on N hosts"; one host (a local audit) reads as English.
    return Finding(check, Status.PASS, tuple(hosts), re.sub(r"\bon 1 hosts\b", "on 1 host",
                                                            message), data)


def pass_others(check: str, hosts: Iterable[str], bad: Iterable[Finding], message: str,
                **data: Any) -> list[Finding]:
    """Returns one pass finding for the hosts that no finding in bad names (none if none)."""
    named = {h for f in bad for h in f.hosts}
    rest = [h for h in hosts if h not in named]
    return [passed(check, rest, message.format(n=len(rest)), **data)] if rest else []


def tier(value: float, warn: float, fail: float, high_is_bad: bool = True,
         ) -> tuple[Status | None, float]:
    """Returns (FAIL, fail bound), (WARN, warn bound) or (None, warn bound) for a value."""
    sign = 1 if high_is_bad else -1  # compare v > bound, or v < bound, as one expression
    if sign * value > sign * fail:
        return Status.FAIL, fail
    if sign * value > sign * warn:
        return Status.WARN, warn
    return None, warn


def mib_floor(check: str, mib: dict[str, int], warn: int, fail: int,
              say: Callable[[str, int, float], str], data: Callable[[str], dict[str, Any]],
              passing: str) -> Iterator[Finding]:
    """A finding per host whose MiB figure is below a floor, and one pass for the rest."""
    ok = []
    for host, value in mib.items():
        status, floor = tier(value, warn, fail, high_is_bad=False)
        if status is None:
            ok.append(host)
        else:
            yield Finding(check, status, (host,), say(host, value, floor), data(host))
    if ok:
        yield passed(check, ok, f"{passing} on {len(ok)} hosts")


def explained_by_cpu(host: str, evidence: str) -> dict[str, str]:
    """What a finding's data carries under EXPLAINED_BY when cpu-cores' finding on host
    explains it: the judge folds it into that finding as evidence, so that one fault is one
    finding with one status (evidence: what this finding saw, said without the host)."""
    return Explanation("cpu-cores", host, evidence).as_data()
