"""Turns the probe's JSON output (untrusted) into HostFacts, with size and type limits."""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Optional, TypeVar, Union

from preflight.collect.smi import parse_smi_csv
from preflight.common.gpumode import fabric, mode
from preflight.common.literal import one_of
from preflight.common.remote import MAX_OUTPUT
from preflight.common.secrets import HOST_HIDDEN, hide_variable
from preflight.model import facts as F
from preflight.model.facts import GPU_SOURCES

SCHEMA = 1
MAX_STR = 4096
MAX_ITEMS = 1024

T = TypeVar("T")


class ProbeOutputError(Exception):
    """The probe's output as a whole is unusable (not JSON, wrong schema, too large)."""


class Malformed(Exception):
    """One field of one section has the wrong type or shape."""


def _get(d: dict[str, Any], key: str) -> Any:
    return d.get(key)


def s(d: dict[str, Any], key: str, required: bool = True) -> Optional[str]:
    v = _get(d, key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise Malformed(f"{key}: expected a string, got {type(v).__name__}")
    return v[:MAX_STR]


def i(d: dict[str, Any], key: str, required: bool = True) -> Optional[int]:
    v = _get(d, key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise Malformed(f"{key}: expected an integer, got {type(v).__name__}")
    return v


def f(d: dict[str, Any], key: str, required: bool = True) -> Optional[float]:
    v = _get(d, key)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise Malformed(f"{key}: expected a number, got {v!r:.40}")
    return float(v)


def b(d: dict[str, Any], key: str) -> Optional[bool]:
    v = _get(d, key)
    if v is not None and not isinstance(v, bool):
        raise Malformed(f"{key}: expected true/false, got {type(v).__name__}")
    return v


def obj(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise Malformed(f"{what}: expected an object, got {type(v).__name__}")
    return v


def items(v: Any, what: str) -> list[Any]:
    if not isinstance(v, list):
        raise Malformed(f"{what}: expected a list, got {type(v).__name__}")
    if len(v) > MAX_ITEMS:
        raise Malformed(f"{what}: {len(v)} items, more than the limit of {MAX_ITEMS}")
    return v


def req(v: Optional[T]) -> T:
    """Narrows a value that a required=True accessor already guaranteed."""
    assert v is not None
    return v


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


def network(d: dict[str, Any]) -> F.NetworkFacts:
    out = []
    for n, raw in enumerate(items(d.get("interfaces"), "interfaces")):
        x = obj(raw, f"interfaces[{n}]")
        addrs = tuple(a[:MAX_STR] for a in items(x.get("addresses", []), "addresses")
                      if isinstance(a, str))
        out.append(F.Interface(name=req(s(x, "name")), mtu=i(x, "mtu", False),
                               state=s(x, "state", False), speed_mbps=i(x, "speed_mbps", False),
                               addresses=addrs))
    route = d.get("default_route")
    ib = d.get("infiniband")
    return F.NetworkFacts(
        interfaces=tuple(out),
        default_route=route[:64] if isinstance(route, str) else None,
        infiniband=tuple(x[:64] for x in items(ib, "infiniband") if isinstance(x, str))
        if isinstance(ib, list) else (),
        reached_at=_ip(d.get("reached_at")), ib_ports=_ib_ports(d.get("ib_ports")),
        **_neighbours(d.get("neighbours")))


def _neighbours(v: Any) -> dict[str, Any]:
    """The neighbour tables, or why they were not read (a section error; an older probe's
    absence says so too)."""
    if v is None:
        return {"neighbours": None, "neighbours_error": "not reported by the probe"}
    if isinstance(v, dict) and "error" in v:
        return {"neighbours": None, "neighbours_error": str(v["error"])[:MAX_STR]}
    out = []
    try:  # a malformed table is this part's error, not the whole network section's
        for n, raw in enumerate(items(v, "neighbours")):
            x = obj(raw, f"neighbours[{n}]")
            out.append(F.NeighbourTable(req(s(x, "family"))[:8], req(i(x, "thresh1")),
                                        req(i(x, "thresh2")), req(i(x, "thresh3")),
                                        i(x, "entries", False), i(x, "table_id", False),
                                        i(x, "table_fulls", False)))
    except Malformed as e:
        return {"neighbours": None, "neighbours_error": f"malformed: {e}"}
    return {"neighbours": tuple(out), "neighbours_error": None}


def _ib_ports(v: Any) -> tuple[F.IbPort, ...]:
    """A section error or an older probe's absence: no ports known."""
    if not isinstance(v, list):
        return ()
    out = []
    for n, raw in enumerate(items(v, "ib_ports")):
        x = obj(raw, f"ib_ports[{n}]")
        rate = s(x, "rate", False)
        try:  # "200 Gb/sec (4X HDR)"
            gbps: Optional[float] = float(rate.split()[0]) if rate else None
        except ValueError:
            gbps = None
        out.append(F.IbPort(req(s(x, "device"))[:64], i(x, "port", False) or 0,
                            s(x, "state", False), gbps, s(x, "link_layer", False)))
    return tuple(out)


def _ip(v: Any) -> Optional[str]:
    """An IP address as the probe reported it, or None (anything else is ignored)."""
    if not isinstance(v, str):
        return None
    try:
        return str(ipaddress.ip_address(v.split("%")[0]))
    except ValueError:
        return None


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


def ports(d: dict[str, Any]) -> F.PortsFacts:
    raw = d.get("tcp")
    if not isinstance(raw, list) or len(raw) > 65536:
        raise Malformed("tcp: expected a list of at most 65536 ports")
    if not all(isinstance(p, int) and 0 <= p < 65536 for p in raw):
        raise Malformed("tcp: every port must be an integer 0-65535")
    return F.PortsFacts(tcp=tuple(sorted(set(raw))))


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


def _xid(d: dict[str, Any]) -> tuple[Optional[tuple[tuple[str, int, str], ...]],
                                     Optional[str]]:
    x = d.get("xid")
    if not isinstance(x, dict):
        return None, None
    if "error" in x:
        return None, s(x, "error", False)
    out = []
    for n, raw in enumerate(items(x.get("events", []), "xid.events")):
        if not (isinstance(raw, list) and len(raw) == 3 and isinstance(raw[1], int)):
            raise Malformed(f"xid.events[{n}]: expected [pci, code, text]")
        out.append((str(raw[0])[:64], raw[1], str(raw[2])[:MAX_STR]))
    return tuple(out), None


def gpu(d: dict[str, Any]) -> F.GpuFacts:
    facts = _gpu(d)
    xid, why = _xid(d)
    return replace(facts, xid=xid, xid_error=why)


def _gpu(d: dict[str, Any]) -> F.GpuFacts:
    source = s(d, "source")
    if source == "nvidia-smi":
        return parse_smi_csv(req(s(d, "csv_fields")), d.get("csv", "")[:65536]
                             if isinstance(d.get("csv"), str) else "",
                             d["apps"][:65536] if isinstance(d.get("apps"), str) else None)
    if source not in ("nvml", "none"):
        raise Malformed(f"source: unknown GPU source {source!r:.40}")
    known = one_of(source, GPU_SOURCES)
    devices = []
    for n, raw in enumerate(items(d.get("devices", []), "devices")):
        x = obj(raw, f"devices[{n}]")
        if "error" in x:  # one GPU NVML could not read: its finding, the others still read
            devices.append(F.GpuDevice(index=req(i(x, "index")), name="unreadable",
                                       memory_total_mib=None, compute_capability=None,
                                       error=req(s(x, "error"))))
            continue
        devices.append(F.GpuDevice(
            index=req(i(x, "index")), name=req(s(x, "name")),
            memory_total_mib=i(x, "memory_total_mib", False),
            compute_capability=s(x, "compute_capability", False),
            uuid=s(x, "uuid", False) or "", vbios=s(x, "vbios", False),
            ecc_mode=mode(x.get("ecc_mode")), mig_mode=mode(x.get("mig_mode")),
            persistence_mode=mode(x.get("persistence_mode")),
            power_limit_w=f(x, "power_limit_w", False),
            pcie_width=i(x, "pcie_width", False), pcie_width_max=i(x, "pcie_width_max", False),
            nvlink_up=i(x, "nvlink_up", False),
            **_fabric(x.get("fabric")),
            ecc_uncorrected_volatile=i(x, "ecc_uncorrected_volatile", False),
            retired_pages_pending=_flag(x.get("retired_pages_pending")),
            remapped_rows_pending=b(x, "remapped_rows_pending"),
            remapped_rows_failure=b(x, "remapped_rows_failure"),
            clock_event_reasons=i(x, "clock_event_reasons", False),
            processes=i(x, "processes", False)))
    return F.GpuFacts(source=known, driver=s(d, "driver", False),
                      cuda_driver=s(d, "cuda_driver", False), devices=tuple(devices))


def _fabric(v: Any) -> dict[str, Any]:
    """NVML's [state, status, health mask] as the fabric's words (model/gpumode.py)."""
    if v is None:
        return {}
    if not (isinstance(v, list) and len(v) == 3
            and all(isinstance(n, int) and not isinstance(n, bool) for n in v)):
        raise Malformed("fabric: expected [state, status, health mask]")
    state, problems = fabric(*v)
    return {"fabric_state": state, "fabric_problems": problems}


def _flag(v: Any) -> Optional[bool]:
    """NVML returns feature states as ints (1 = enabled / pending)."""
    if v is None:
        return None
    if isinstance(v, (bool, int)):
        return bool(v)
    raise Malformed(f"expected a flag, got {type(v).__name__}")


def _text_or_none(v: Any) -> Optional[str]:
    """Paddle reports 'False' / '0' / None for fields a CPU build lacks: keep them as text."""
    if v is None:
        return None
    return str(v)[:256]


def paddle(d: dict[str, Any]) -> F.PaddleFacts:
    archs = d.get("cuda_archs")
    return F.PaddleFacts(
        interpreter=req(s(d, "interpreter")), available=bool(b(d, "available")),
        reason=s(d, "reason", False), python=s(d, "python", False),
        version=s(d, "version", False), commit=s(d, "commit", False),
        cuda=_text_or_none(d.get("cuda")), cudnn=_text_or_none(d.get("cudnn")),
        nccl=_text_or_none(d.get("nccl")),
        cuda_archs=tuple(int(a) for a in items(archs, "cuda_archs") if isinstance(a, int))
        if archs is not None else None,
        compiled_with_cuda=b(d, "compiled_with_cuda"),
        compiled_with_distribute=b(d, "compiled_with_distribute"),
        ps_core=b(d, "ps_core"), nccl_runtime=_text_or_none(d.get("nccl_runtime")),
        cudnn_runtime=_text_or_none(d.get("cudnn_runtime")),
        gpu_visible=i(d, "gpu_visible", False), gpu_error=s(d, "gpu_error", False),
        gpu_ops=_gpu_ops(d.get("gpu_ops")), import_s=f(d, "import_s", False),
        protobuf=s(d, "protobuf", False))


def _gpu_ops(v: Any) -> Optional[tuple[tuple[int, Optional[str]], ...]]:
    if v is None:
        return None
    out = []
    for n, raw in enumerate(items(v, "gpu_ops")):
        x = obj(raw, f"gpu_ops[{n}]")
        out.append((req(i(x, "index")), s(x, "error", False)))
    return tuple(out)


def _strings(v: Any, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    raw = items(v, what)
    if len(raw) > MAX_ITEMS or not all(isinstance(x, str) for x in raw):
        raise Malformed(f"{what}: expected at most {MAX_ITEMS} strings")
    return tuple(x[:MAX_STR] for x in raw)


def container(d: dict[str, Any]) -> F.ContainerFacts:
    """The job's container: what the probe found and what its process runs with."""
    raw_intent = d.get("intent")
    intent = None
    if raw_intent is not None:
        x = obj(raw_intent, "intent")
        intent = F.ContainerIntent(
            network_mode=s(x, "network_mode", False), ipc_mode=s(x, "ipc_mode", False),
            shm_size_bytes=i(x, "shm_size_bytes", False),
            devices=_strings(x.get("devices"), "intent.devices"),
            gpu_requests=_strings(x.get("gpu_requests"), "intent.gpu_requests"))
    gpu_env = []
    for pair in items(d.get("gpu_env") or [], "gpu_env"):
        kv = _strings(pair, "gpu_env")
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
        infiniband=_strings(d.get("infiniband"), "infiniband"),
        nvidia=_strings(d.get("nvidia"), "nvidia"), gpu_env=tuple(gpu_env), intent=intent)


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
