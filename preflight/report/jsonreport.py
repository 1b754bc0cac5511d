"""The JSON report: verdict, hosts with their facts, findings; written atomically, and read
back once into the typed Report (model/report.py) that every renderer and action takes."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Optional

from preflight.common.containercmd import node_command
from preflight.common.plain import facts_json
from preflight.common.plain import jsonable as jsonable  # the report's writer, shared
from preflight.config.errors import InputError, read_input
from preflight.config.typed import decode
from preflight.model.cluster import Cluster
from preflight.model.findings import Judgement
from preflight.model.measure import NetworkTests
from preflight.model.plan import Plan
from preflight.model.report import Report

REPORT_VERSION = 1


def document(cluster: Cluster, judgement: Judgement, meta: Optional[dict[str, Any]] = None,
             plan: Optional[Plan] = None) -> dict[str, Any]:
    """Returns the report as a JSON-ready dict (the format docs/reports.md documents)."""
    hosts = {}
    for o in cluster.outcomes:
        hosts[o.host.name] = {
            "address": o.host.address,
            "via": o.host.via.value,  # the transport that reached it
            # How SSH reached it (no key paths: a report is shared; the log has them).
            "ssh": None if (t := o.host.reached_over_ssh) is None else {
                "user": t.user, "port": t.port,
                "via": [f"{j.ssh.user}@{j.address}:{j.ssh.port}" for j in t.jump]},
            "status": "ok" if o.ok else "failed",
            "failure": jsonable(o.failure),
            "elapsed_s": round(o.elapsed_s, 3),
            "facts": facts_json(o.facts),
        }
    return {
        "report_version": REPORT_VERSION,
        "verdict": judgement.verdict.value,
        "reasons": list(judgement.reasons),
        "waived": list(judgement.waived),
        **(meta or {}),
        "hosts": hosts,
        "network": network_doc(cluster.network),
        "plan": plan_doc(plan),
        "findings": [
            {"check": f.check, "status": f.status.value, "hosts": list(f.hosts),
             "message": f.message, "data": jsonable(dict(f.data))}
            for f in judgement.findings
        ],
    }


def network_doc(net: Optional[NetworkTests]) -> Optional[dict[str, Any]]:
    """Returns the active tests' measurements (None when they were not run)."""
    if net is None:
        return None
    ar = net.allreduce
    return {
        "schedule": net.schedule,
        "hosts": list(net.hosts),
        "skipped": dict(net.skipped),
        "interrupted": net.interrupted,
        "wall_s": round(net.wall_s, 3),
        "rounds": net.rounds,
        "links": [{"sender": r.sender, "receiver": r.receiver, "phase": r.phase,
                   "received_bps": r.result.received_bps, "sent_bps": r.result.sent_bps,
                   "retransmits": r.result.retransmits, "loss_pct": r.result.loss_pct,
                   "seconds": r.result.seconds, "streams": r.result.streams,
                   "error": r.result.error} for r in net.links],
        "nic_mbps": dict(net.nic_mbps),
        "nic_counters": {h: {"interface": c.interface, "grew": dict(c.grew)}
                         for h, c in net.nic_counters.items()},
        "allreduce": None if ar is None else {
            "backend": ar.backend, "hosts": list(ar.hosts), "ranks": ar.ranks,
            "error": ar.error, "failed": dict(ar.failed), "log_hints": dict(ar.logs),
            "wall_s": round(ar.wall_s, 3), "budget_s": ar.budget_s,
            "predicted_s": None if ar.predicted_s is None else round(ar.predicted_s, 3),
            "iters": ar.iters, "dropped": list(ar.dropped), "outcome": ar.outcome,
            "launch_s": None if ar.launch_s is None else round(ar.launch_s, 3),
            "progress": dict(ar.progress), "cut": ar.cut, "expected": ar.expected,
            "sizes": [{"bytes": s.nbytes, "seconds": s.seconds, "algbw_bytes_s": s.algbw,
                       "busbw_bytes_s": s.busbw} for s in ar.sizes]},
        "allreduce_skipped": net.allreduce_skipped,
        "allreduce_left_out": dict(net.allreduce_left_out),
    }


def plan_doc(plan: Optional[Plan]) -> Optional[dict[str, Any]]:
    """Returns the placement plan: who runs what where, who was left out, the commands."""
    if plan is None:
        return None
    return {
        "mode": plan.mode,
        "fits": plan.fits,
        "lacks": list(plan.lacks),
        "notes": list(plan.notes),
        "requested": jsonable(plan.shape),
        "nproc_per_node": plan.nproc_per_node,
        "master": plan.master,
        "servers": [{"host": e.host, "endpoint": str(e)} for e in plan.servers],
        "workers": [{"host": e.host, "endpoint": str(e)} for e in plan.workers],
        "excluded": {h: list(r) for h, r in plan.excluded.items()},
        "costs": {h: {"bytes": c.nbytes, "with_s": round(c.with_s, 3),
                      "without_s": round(c.without_s, 3), "factor": round(c.factor, 2),
                      "basis": c.basis} for h, c in plan.costs.items()},
        "nodes": [{"host": n.host, "address": n.address, "rank": n.rank, "nproc": n.nproc,
                   "python": n.python, "ports": list(n.ports), "argv": list(n.argv),
                   "env": dict(n.env), "command": node_command(n),
                   "container": jsonable(n.container)} for n in plan.nodes],
    }


def write_atomic(path: str, doc: dict[str, Any]) -> None:
    """Writes doc as JSON to path so that a reader sees the old file or the whole new one."""
    write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


STDOUT = "-"  # a report flag's value that means standard output


def write_text_atomic(path: str, text: str) -> None:
    """Writes text to path so that a reader sees the old file or the whole new one, never half.
    '-' is standard output; a symlink is written through (the link stays, its target is
    replaced); a target that is not a regular file (a pipe, /dev/stdout) is written as is."""
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if os.path.exists(path) and not os.path.isfile(path):  # a pipe, a device
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    real = os.path.realpath(path)
    directory = os.path.dirname(real)
    fd, tmp = tempfile.mkstemp(prefix=".preflight-report-", suffix=".tmp", dir=directory)
    try:
        # mkstemp makes 0600; a report is shared (CI artifacts, a web server): use the umask.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read(path: str) -> Report:
    """Returns a report (or baseline) written by write_atomic, decoded; raises InputError
    naming the file, and the field, when it is not one preflight can read."""
    return typed(load(path), path)


def load(path: str) -> dict[str, Any]:
    """Returns the JSON document of a report (or baseline), of a version this preflight
    reads; raises InputError naming the file when it is not one."""
    text = read_input(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not a JSON report: {e.msg}", line=e.lineno) from None
    if not isinstance(doc, dict) or "report_version" not in doc:
        raise InputError(path, "not a preflight report (no report_version; made by "
                         "preflight check --json or preflight baseline)")
    if doc["report_version"] != REPORT_VERSION:
        raise InputError(path, f"report version {doc['report_version']!r} is not "
                         f"{REPORT_VERSION}, the one this preflight reads",
                         field="report_version")
    return doc


def typed(doc: dict[str, Any], path: str = "the report") -> Report:
    """The document as the typed Report (what a run renders, and what read returns)."""
    return decode(Report, doc, path)


def encode(report: Report, base: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Returns report as its JSON document: document()'s shape. Keys of base that the types do
    not know (a transport's notes, a later release's) are kept, so a report read and written
    again (preflight report --json) loses nothing."""
    doc = {**(base or {}), **jsonable(report)}
    if doc["baseline"] is None:
        del doc["baseline"]  # a baseline file's section: a report has none
    for name, h in doc["hosts"].items():
        h["facts"] = facts_json(report.hosts[name].facts)
    return doc
