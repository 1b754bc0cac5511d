"""Baselines: what a known-good cluster looked like and measured, and when and where.

A baseline file is a JSON report (so `preflight diff` and the other readers take it as it is)
with one more section, "baseline": the profile of every host, the reference profile (each
field's majority), the reference link bandwidth and all-reduce figure, and who took it."""

from __future__ import annotations

import getpass
import socket
import statistics
from collections.abc import Mapping
from typing import Optional

from preflight.common import localise, profile
from preflight.config.errors import InputError
from preflight.model.baseline import AllReduceRef, Baseline, Profile
from preflight.model.measure import NetworkTests
from preflight.model.report import AllReduceRefEntry, BaselineSection, Report

BASELINE_VERSION = 1


def link_reference(net: Optional[NetworkTests]) -> Optional[float]:
    """Returns what a healthy host's link reaches: the median of hosts' best survey links
    (with fewer than 3 hosts, the median link)."""
    if net is None:
        return None
    runs = localise.measured(net.links)
    if not runs:
        return None
    ref = localise.reference_bps(runs)
    return ref if ref is not None else statistics.median(r.bps for r in runs if r.bps)


def allreduce_reference(net: Optional[NetworkTests]) -> Optional[AllReduceRef]:
    ar = net.allreduce if net else None
    if ar is None or not ar.certified:
        return None
    top = max(ar.sizes, key=lambda s: s.nbytes)
    return AllReduceRef(ar.backend, ar.ranks, top.nbytes, top.busbw)


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment or passwd (containers)
        return "?"


def section(profiles: Mapping[str, Profile], net: Optional[NetworkTests], started_at: float,
            inventory: Optional[str]) -> BaselineSection:
    """Returns the "baseline" section recorded next to the report of a known-good run, from
    the profile of every host that answered."""
    ar = allreduce_reference(net)
    return BaselineSection(
        baseline_version=BASELINE_VERSION, taken_at=started_at, taken_on=socket.gethostname(),
        taken_by=_user(), inventory=inventory, hosts=tuple(profiles), profiles=dict(profiles),
        reference=profile.reference(list(profiles.values())), link_bps=link_reference(net),
        allreduce=None if ar is None else AllReduceRefEntry(ar.backend, ar.ranks, ar.nbytes,
                                                            ar.busbw))


def from_document(path: str, report: Report) -> Baseline:
    """Returns the baseline of a report read by jsonreport.read (which decoded its section);
    raises InputError naming the file and field when it is not a baseline, or not one this
    release can use."""
    sec = report.baseline
    if sec is None:
        raise InputError(path, "not a baseline (a report without its \"baseline\" section; "
                         "record one with preflight baseline -i INVENTORY -o FILE)",
                         field="baseline")
    if sec.baseline_version != BASELINE_VERSION:
        raise InputError(path, f"baseline version {sec.baseline_version!r} is not "
                         f"{BASELINE_VERSION}", field="baseline.baseline_version")
    if not sec.profiles:
        raise InputError(path, "expected a mapping of host -> profile with at least one host",
                         field="baseline.profiles")
    for name in ("taken_at", "link_bps"):
        value = getattr(sec, name)
        if value is not None and value < 0:
            raise InputError(path, f"expected a number >= 0, got {value}",
                             field=f"baseline.{name}")
    ar = sec.allreduce
    return Baseline(path=path, taken_at=sec.taken_at, taken_on=sec.taken_on or "?",
                    hosts=tuple(sec.profiles), profiles=dict(sec.profiles),
                    reference=sec.reference, link_bps=sec.link_bps,
                    allreduce=None if ar is None else AllReduceRef(
                        ar.backend, ar.ranks, ar.bytes, ar.busbw_bytes_s),
                    inventory=sec.inventory)
