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

from preflight.config.errors import InputError
from preflight.history import profile
from preflight.model.baseline import AllReduceRef, Baseline, Profile
from preflight.model.measure import NetworkTests
from preflight.network import localise

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
    if ar is None or ar.error or not ar.sizes:
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


def _number(path: str, sec: Mapping[str, Any], key: str, optional: bool = False,
            ) -> Optional[float]:
    v = sec.get(key)
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise InputError(path, f"expected a number >= 0, got {v!r}"[:160],
                         field=f"baseline.{key}")
    return float(v)


def from_document(path: str, doc: Mapping[str, Any]) -> Baseline:
    """Returns the baseline of a document read by jsonreport.read; raises InputError naming
    the file and field when it is not a baseline or is malformed."""
    sec = doc.get("baseline")
    if not isinstance(sec, dict):
        raise InputError(path, "not a baseline (a report without its \"baseline\" section; "
                         "record one with preflight baseline -i INVENTORY -o FILE)",
                         field="baseline")
    if sec.get("baseline_version") != BASELINE_VERSION:
        raise InputError(path, f"baseline version {sec.get('baseline_version')!r} is not "
                         f"{BASELINE_VERSION}", field="baseline.baseline_version")
    taken_at = _number(path, sec, "taken_at")
    assert taken_at is not None
    profiles: dict[str, Profile] = {}
    raw = sec.get("profiles")
    if not isinstance(raw, dict) or not raw:
        raise InputError(path, "expected a mapping of host -> profile with at least one host",
                         field="baseline.profiles")
    for host, data in raw.items():
        if not isinstance(data, dict):
            raise InputError(path, "expected a mapping", host=host, field="baseline.profiles")
        try:
            profiles[host] = profile.from_json(data)
        except ValueError as e:
            raise InputError(path, str(e), host=host, field="baseline.profiles") from None
    ref = sec.get("reference")
    try:
        reference = profile.from_json(ref) if isinstance(ref, dict) else None
    except ValueError as e:
        raise InputError(path, str(e), field="baseline.reference") from None
    if reference is None:
        raise InputError(path, "expected a mapping", field="baseline.reference")
    ar = sec.get("allreduce")
    allreduce = None
    if ar is not None:
        if not isinstance(ar, dict):
            raise InputError(path, "expected a mapping or null", field="baseline.allreduce")
        nbytes, busbw = _number(path, ar, "bytes"), _number(path, ar, "busbw_bytes_s")
        ranks = _number(path, ar, "ranks")
        assert nbytes is not None and busbw is not None and ranks is not None
        allreduce = AllReduceRef(str(ar.get("backend")), int(ranks), int(nbytes), busbw)
    return Baseline(path=path, taken_at=taken_at, taken_on=str(sec.get("taken_on") or "?"),
                    hosts=tuple(profiles), profiles=profiles, reference=reference,
                    link_bps=_number(path, sec, "link_bps", optional=True),
                    allreduce=allreduce, inventory=sec.get("inventory"))
