"""Turns the probe's JSON output (untrusted) into HostFacts, with size and type limits: the
document, and the host's system, CPU, memory, files, environment, container and clock
sections; the network's in parse_net, the GPUs' and Paddle's in parse_gpu, all read through
the typed readers of fields."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional, Union

from preflight.collect.fields import MAX_ITEMS as MAX_ITEMS
from preflight.collect.fields import MAX_STR as MAX_STR
from preflight.collect.fields import Malformed as Malformed
from preflight.collect.fields import b, f, i, items, obj, req, s, strings
from preflight.collect.parse_gpu import gpu as gpu
from preflight.collect.parse_gpu import paddle as paddle
from preflight.collect.parse_net import network as network
from preflight.collect.parse_net import ports as ports
from preflight.common.remote import MAX_OUTPUT
from preflight.common.secrets import HOST_HIDDEN, hide_variable
from preflight.model import facts as F

SCHEMA = 1


class ProbeOutputError(Exception):
    """The probe's output as a whole is unusable (not JSON, wrong schema, too large)."""


def system(d: dict[str, Any]) -> F.SystemFacts:
    return F.SystemFacts(hostname=req(s(d, "hostname")), kernel=req(s(d, "kernel")),
                         arch=req(s(d, "arch")), os=req(s(d, "os")), python=req(s(d, "python")))


def _quota(q: Any) -> Optional[F.CpuQuota]:
    if q is None:
        return None
    q = obj(q, "quota")
    return F.CpuQuota(version=req(i(q, "version")), quota_us=req(i(q, "quota_us")),
                      period_us=req(i(q, "period_us")), cores=req(f(q, "cores")))


def _cgroup(d: dict[str, Any]) -> F.ContainerCgroup:
    return F.ContainerCgroup(affinity=req(i(d, "affinity")), cpuset=s(d, "cpuset", False) or "",
                             quota=_quota(d.get("quota")),
                             memory_limit_bytes=i(d, "memory_limit_bytes", False))


def cpu(d: dict[str, Any]) -> F.CpuFacts:
    quota = _quota(d.get("quota"))
    load = tuple(float(x) for x in items(d.get("loadavg", []), "loadavg")
                 if isinstance(x, (int, float)))
    work = None
    if isinstance(d.get("other_work"), dict):
        w = obj(d["other_work"], "other_work")
        work = F.OtherWork(scope=req(s(w, "scope")), busy_cores=req(f(w, "busy_cores")),
                           window_s=req(f(w, "window_s")))
    psi = d.get("pressure")
    avg10 = f(obj(psi, "pressure"), "some_avg10", False) if isinstance(psi, dict) else None
    smt = obj(d["smt"], "smt") if isinstance(d.get("smt"), dict) else {}
    active = smt.get("smt_active")
    return F.CpuFacts(logical=req(i(d, "logical")), affinity=req(i(d, "affinity")),
                      effective=req(f(d, "effective")), utilization=req(f(d, "utilization")),
                      loadavg=load, quota=quota, model=s(d, "model", required=False),
                      other_work=work, pressure_avg10=avg10,
                      threads_per_core=i(smt, "threads_per_core", False),
                      smt_active=active if isinstance(active, bool) else None)


def memory(d: dict[str, Any]) -> F.MemoryFacts:
    limit = d.get("cgroup_limit_bytes")
    return F.MemoryFacts(total_bytes=i(d, "total_bytes", False),
                         available_bytes=i(d, "available_bytes", False),
                         cgroup_limit_bytes=limit if isinstance(limit, int)
                         and not isinstance(limit, bool) else None)


def shm(d: dict[str, Any]) -> F.ShmFacts:
    return F.ShmFacts(size_bytes=req(i(d, "size_bytes")), free_bytes=req(i(d, "free_bytes")))


def tmp(d: dict[str, Any]) -> F.TmpFacts:
    return F.TmpFacts(path=req(s(d, "path")), size_bytes=req(i(d, "size_bytes")),
                      free_bytes=req(i(d, "free_bytes")))


def limits(d: dict[str, Any]) -> F.LimitsFacts:
    def lim(key: str) -> F.Limit:
        x = obj(d.get(key), key)
        return F.Limit(soft=i(x, "soft", False), hard=i(x, "hard", False))
    return F.LimitsFacts(nofile=lim("nofile"), memlock=lim("memlock"))


def files(d: dict[str, Any]) -> F.FilesFacts:
    raw = obj(d.get("files"), "files")
    if len(raw) > MAX_ITEMS:
        raise Malformed(f"files: more than {MAX_ITEMS} entries")
    out = []
    for path, x in sorted(raw.items()):
        x = obj(x, f"files[{path[:64]}]")
        if "error" in x:
            out.append(F.FileFact(path=path[:MAX_STR], error=str(x["error"])[:MAX_STR]))
        else:
            out.append(F.FileFact(path=path[:MAX_STR], sha256=s(x, "sha256"),
                                  size=i(x, "size", False)))
    return F.FilesFacts(files=tuple(out))


def env(d: dict[str, Any]) -> F.EnvFacts:
    raw = obj(d.get("vars"), "vars")
    if len(raw) > MAX_ITEMS:
        raise Malformed(f"vars: more than {MAX_ITEMS} variables")
    pairs = []
    for k, v in sorted(raw.items()):
        if not isinstance(v, str):
            raise Malformed(f"vars.{k[:64]}: expected a string")
        # Its secrets hidden (common/secrets.py; the host side hid what it knew already).
        pairs.append((k[:256], v[:MAX_STR] if v == HOST_HIDDEN else
                      hide_variable(k, v[:MAX_STR])))
    return F.EnvFacts(vars=tuple(pairs))


def container(d: dict[str, Any]) -> F.ContainerFacts:
    """The job's container: what the probe found and what its process runs with."""
    raw_intent = d.get("intent")
    intent = None
    if raw_intent is not None:
        x = obj(raw_intent, "intent")
        intent = F.ContainerIntent(
            network_mode=s(x, "network_mode", False), ipc_mode=s(x, "ipc_mode", False),
            shm_size_bytes=i(x, "shm_size_bytes", False),
            devices=strings(x.get("devices"), "intent.devices"),
            gpu_requests=strings(x.get("gpu_requests"), "intent.gpu_requests"))
    gpu_env = []
    for pair in items(d.get("gpu_env") or [], "gpu_env"):
        kv = strings(pair, "gpu_env")
        if len(kv) != 2:
            raise Malformed("gpu_env: expected [name, value] pairs")
        gpu_env.append((kv[0][:256], kv[1]))
    return F.ContainerFacts(
        runtime=req(s(d, "runtime")), image=s(d, "image", False), name=s(d, "name", False),
        image_id=s(d, "image_id", False), missing=s(d, "missing", False),
        start_s=f(d, "start_s", False), error=s(d, "start_error", False),
        no_runtime=s(d, "no_runtime", False), unread=s(d, "unread", False),
        env=env(obj(d["env"], "env")) if isinstance(d.get("env"), dict) else None,
        cgroup=_cgroup(d["cgroup"]) if isinstance(d.get("cgroup"), dict)
        and "error" not in d["cgroup"] else None,
        host_network=b(d, "host_network"), host_ipc=b(d, "host_ipc"),
        shm=shm(obj(d["shm"], "shm")) if isinstance(d.get("shm"), dict)
        and "error" not in d["shm"] else None,
        limits=limits(obj(d["limits"], "limits")) if d.get("limits") else None,
        infiniband=strings(d.get("infiniband"), "infiniband"),
        nvidia=strings(d.get("nvidia"), "nvidia"), gpu_env=tuple(gpu_env), intent=intent)


def clock(d: dict[str, Any], received_at: float, sent_at: float = 0.0,
          started: Optional[float] = None) -> F.ClockFacts:
    """The host's clock against the controller's, as an interval: the probe stamped its
    clock (epoch) after the controller sent the command (sent_at) plus the probe's own run
    on the host (epoch - started, a duration both clocks agree on), and before its output
    arrived (received_at). So host minus controller lies in [epoch - received_at,
    started - sent_at]: its midpoint is the skew, half its width the uncertainty, which is
    the command's delays alone (a slow start, a late answer), not the probe's own run."""
    epoch = req(f(d, "epoch"))
    if not received_at:
        return F.ClockFacts(epoch=epoch)
    lo = epoch - received_at
    if not sent_at or started is None:
        return F.ClockFacts(epoch=epoch, skew_s=round(lo, 3))
    hi = max(lo, started - sent_at)
    return F.ClockFacts(epoch=epoch, skew_s=round((lo + hi) / 2, 3),
                        uncertainty_s=round((hi - lo) / 2, 3))


SectionParser = Callable[[dict[str, Any]], Any]
SECTIONS: dict[str, SectionParser] = {
    "system": system, "cpu": cpu, "memory": memory, "shm": shm, "limits": limits,
    "network": network, "ports": ports, "env": env, "files": files, "gpu": gpu,
    "paddle": paddle,
}
# Sections that may be absent: tmp (an older probe did not report it) and container (the
# job runs on the host).
OPTIONAL = ("tmp", "container")
OPTIONAL_PARSERS: dict[str, SectionParser] = {"tmp": tmp, "container": container}


def parse_section(name: str, raw: Any, received_at: float = 0.0, sent_at: float = 0.0,
                  started: Optional[float] = None) -> Any:
    """Returns one section's fact, or the SectionError that replaces it (missing, failed on
    the host, or malformed). clock needs the controller's times of sending and arrival, and
    the probe's start, for its skew."""
    if raw is None:
        return F.SectionError(f"section {name} missing from the probe output")
    if not isinstance(raw, dict):
        return F.SectionError(f"section {name}: expected an object")
    if "error" in raw:
        return F.SectionError(str(raw["error"])[:MAX_STR])
    parser: SectionParser = (
        (lambda d: clock(d, received_at, sent_at, started)) if name == "clock"
        else OPTIONAL_PARSERS.get(name)
        or SECTIONS[name])
    try:
        return parser(raw)
    except (Malformed, ValueError, TypeError) as e:
        return F.SectionError(f"malformed {name} section: {e}"[:MAX_STR])


def parse_probe_output(raw: Union[str, bytes], received_at: float = 0.0,
                       sent_at: float = 0.0) -> F.HostFacts:
    """Returns the facts of one probe document; raises ProbeOutputError if it is unusable.
    received_at, sent_at: the controller's epoch when its output arrived and when the
    command that ran it was sent (the clock's bounds)."""
    if len(raw) > MAX_OUTPUT:
        raise ProbeOutputError(f"probe output is {len(raw)} bytes, over the limit "
                               f"of {MAX_OUTPUT}")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    if not text:
        raise ProbeOutputError("probe printed nothing")
    try:
        doc = json.loads(text.splitlines()[-1])
    except ValueError as e:
        raise ProbeOutputError(f"probe output is not valid JSON ({e}): "
                               f"{text[:80]!r}") from None
    if not isinstance(doc, dict):
        raise ProbeOutputError("probe output is not a JSON object")
    schema = doc.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ProbeOutputError("probe output has no schema number")
    if schema != SCHEMA:
        raise ProbeOutputError(f"probe output has schema {schema}; this preflight reads "
                               f"schema {SCHEMA}")
    started = doc.get("started")
    started = float(started) if isinstance(started, (int, float)) and \
        not isinstance(started, bool) else None
    parsed = {name: parse_section(name, doc.get(name), received_at, sent_at, started)
              for name in (*SECTIONS, "clock")}
    parsed.update({name: parse_section(name, doc[name]) for name in OPTIONAL if name in doc})
    elapsed = doc.get("elapsed_s")
    return F.HostFacts(
        schema=schema,
        probe_elapsed_s=float(elapsed) if isinstance(elapsed, (int, float)) else 0.0,
        **parsed,
    )
