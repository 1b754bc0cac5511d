"""Baselines: what a known-good cluster looked like and measured, and when and where.

A baseline file is a JSON report (so `preflight diff` and the other readers take it as it is)
with one more section, "baseline": the profile of every host, the reference profile (each
field's majority), the reference link bandwidth and all-reduce figure, and who took it."""

from __future__ import annotations

import getpass
import socket
import statistics
from collections.abc import Mapping
from typing import Any, Optional

from preflight.common import localise, profile
from preflight.config.document import Fields
from preflight.config.errors import InputError
from preflight.model.baseline import AllReduceRef, Baseline, Profile
from preflight.model.measure import NetworkTests
from preflight.model.report import Report

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
            inventory: Optional[str]) -> dict[str, Any]:
    """Returns the "baseline" section recorded next to the report of a known-good run, from
    the profile of every host that answered."""
    ar = allreduce_reference(net)
    return {
        "baseline_version": BASELINE_VERSION,
        "taken_at": started_at,
        "taken_on": socket.gethostname(),
        "taken_by": _user(),
        "inventory": inventory,
        "hosts": list(profiles),
        "profiles": {h: profile.to_json(p) for h, p in profiles.items()},
        "reference": profile.to_json(profile.reference(list(profiles.values()))),
        "link_bps": link_reference(net),
        "allreduce": None if ar is None else {"backend": ar.backend, "ranks": ar.ranks,
                                              "bytes": ar.nbytes, "busbw_bytes_s": ar.busbw},
    }


def from_document(path: str, report: Report) -> Baseline:
    """Returns the baseline of a report read by jsonreport.read; raises InputError naming
    the file and field when it is not a baseline or is malformed."""
    if report.baseline is None:
        raise InputError(path, "not a baseline (a report without its \"baseline\" section; "
                         "record one with preflight baseline -i INVENTORY -o FILE)",
                         field="baseline")
    sec = Fields(path, report.baseline, "baseline")
    if sec.data.get("baseline_version") != BASELINE_VERSION:
        sec.fail(f"baseline version {sec.data.get('baseline_version')!r} is not "
                 f"{BASELINE_VERSION}", "baseline_version")
    taken_at = sec.number("taken_at")
    assert taken_at is not None
    raw = sec.data.get("profiles")
    if not isinstance(raw, dict) or not raw:
        sec.fail("expected a mapping of host -> profile with at least one host", "profiles")
    profiles = {str(h): _profile(Fields(path, raw, sec.field("profiles"), host=str(h)), v, None)
                for h, v in raw.items()}
    reference = _profile(sec, sec.data.get("reference"), "reference")
    ar = sec.mapping("allreduce", "a mapping or null", optional=True)
    allreduce = None
    if ar is not None:
        nbytes, busbw, ranks = ar.number("bytes"), ar.number("busbw_bytes_s"), ar.number("ranks")
        assert nbytes is not None and busbw is not None and ranks is not None
        allreduce = AllReduceRef(str(ar.data.get("backend")), int(ranks), int(nbytes), busbw)
    return Baseline(path=path, taken_at=taken_at, taken_on=str(sec.data.get("taken_on") or "?"),
                    hosts=tuple(profiles), profiles=profiles, reference=reference,
                    link_bps=sec.number("link_bps", optional=True),
                    allreduce=allreduce, inventory=sec.data.get("inventory"))


def _profile(where: Fields, data: Any, key: Optional[str]) -> Profile:
    """Returns a stored profile (a mapping of known fields and plain values); an error names
    where's field, or its key."""
    if not isinstance(data, dict):
        where.fail("expected a mapping", key)
    try:
        return profile.from_json(data)
    except ValueError as e:
        where.fail(str(e), key)
