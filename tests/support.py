"""Builders of facts for the unit tests of checks (the fake side of collect-apart-from-judge)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Optional

from preflight.model import facts as F
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status
from preflight.model.host import Host, HostFailure, HostOutcome, Stage
from preflight.model.measure import (
    RETEST,
    SURVEY,
    AllReduce,
    IperfResult,
    LinkRun,
    NetworkTests,
    Phase,
)
from preflight.model.policy import Limits, Policy
from preflight.network.schedule import ring_rounds


def gpu(n: int = 8, name: str = "NVIDIA H100 80GB HBM3", mem: int = 81559, cc: str = "9.0",
        driver: str = "550.54.15") -> F.GpuFacts:
    return F.GpuFacts(source="nvml", driver=driver, cuda_driver="12.4", devices=tuple(
        F.GpuDevice(index=i, name=name, memory_total_mib=mem, compute_capability=cc)
        for i in range(n)))


def paddle(version: str = "3.3.1", **kw: Any) -> F.PaddleFacts:
    base: dict[str, Any] = dict(
        interpreter="/opt/paddle/bin/python", available=True, python="3.11.2",
        version=version, commit="c0ffee" + version, cuda="12.4", cudnn="9.5.1",
        nccl="22501", cuda_archs=(90,), compiled_with_cuda=True, ps_core=False)
    base.update(kw)
    return F.PaddleFacts(**base)


def cpu(effective: float = 16.0, logical: int = 16, quota: Optional[F.CpuQuota] = None,
        busy: Optional[float] = None, threads_per_core: Optional[int] = None,
        loadavg: float = 0.1, pressure: Optional[float] = None) -> F.CpuFacts:
    """busy: cores other work used over a 3 s sample in the host's cgroup (None: facts
    without the cgroup-aware sample, as older probes gave)."""
    work = None if busy is None else F.OtherWork("cgroup v1 /sys/fs/cgroup/cpuacct/job", busy,
                                                 3.0)
    return F.CpuFacts(logical=logical, affinity=logical, effective=effective, utilization=0.1,
                      loadavg=(loadavg, loadavg, loadavg), quota=quota, other_work=work,
                      pressure_avg10=pressure, threads_per_core=threads_per_core)


# The kernel's default ARP table, its own on each host (no table id: not one shared kernel).
NEIGHBOURS = F.NeighbourTable("ipv4", 128, 512, 1024, entries=12)


def host_facts(**sections: Any) -> F.HostFacts:
    base: dict[str, Any] = dict(
        schema=1,
        system=F.SystemFacts("n", "6.1", "x86_64", "Debian 12", "3.11.2"),
        cpu=cpu(), memory=F.MemoryFacts(1 << 36, 1 << 35), shm=F.ShmFacts(1 << 34, 1 << 34),
        limits=F.LimitsFacts(F.Limit(65536, 65536), F.Limit(None, None)),
        network=F.NetworkFacts((F.Interface("eth0", 1500, "up", 10000, ("10.0.0.1/24",)),),
                               default_route="eth0", neighbours=(NEIGHBOURS,)),
        ports=F.PortsFacts((22,)), env=F.EnvFacts(()), files=F.FilesFacts(()),
        gpu=gpu(), paddle=paddle(), clock=F.ClockFacts(0.0, 0.0),
        tmp=F.TmpFacts("/tmp", 1 << 36, 1 << 35))
    base.update(sections)
    return F.HostFacts(**base)


def outcome(name: str, facts: Optional[F.HostFacts] = None,
            failure: Optional[HostFailure] = None) -> HostOutcome:
    host = Host(name=name, address=f"10.0.0.{abs(hash(name)) % 250 + 1}")
    if facts is None and failure is None:
        facts = host_facts()
    return HostOutcome(host, facts=facts, failure=failure)


def cluster(**hosts: Any) -> Cluster:
    """cluster(node01={}, node02={"gpu": gpu(n=4)}, node03=HostFailure(...))."""
    out = []
    for name, spec in hosts.items():
        if isinstance(spec, HostFailure):
            out.append(outcome(name, failure=spec))
        else:
            out.append(outcome(name, host_facts(**spec)))
    return Cluster(tuple(out))


def same(n: int, **spec: Any) -> dict[str, Any]:
    """n hosts node01..nodeNN with the same facts."""
    return {f"node{i:02d}": dict(spec) for i in range(1, n + 1)}


# Inventory values that would run `touch {m}` if they ever reached a shell unquoted.
HOSTILE = [
    "$(touch {m})", "`touch {m}`", "x; touch {m}", "x' ; touch {m} ; '", 'x" ; touch {m} ; "',
    "x && touch {m}", "x | touch {m}", "--help; touch {m}", "*", "x\\' ; touch {m}",
]
G = 1e9


MSS = 1448


def link(s: str, r: str, bps: Optional[float], phase: Phase = SURVEY, loss_pct: float = 0.0,
         ) -> LinkRun:
    """One 1 s iperf3 run from s to r retransmitting loss_pct of its segments; None bps
    stands for a failed run."""
    if not bps:
        return LinkRun(s, r, phase, IperfResult(error="refused"))
    sent = bps / 8
    return LinkRun(s, r, phase, IperfResult(
        received_bps=bps, sent_bps=bps, seconds=1.0, sent_bytes=sent, mss=MSS,
        retransmits=round(loss_pct / 100 * sent / MSS)))


def survey(hosts: Sequence[str], speed: Callable[[str, str], float],
           schedule: Callable[[Sequence[str]], list[list[tuple[str, str]]]] = ring_rounds,
           loss: Callable[[str, str], float] = lambda s, r: 0.0) -> list[LinkRun]:
    """Every scheduled pair measured at speed(sender, receiver), losing loss(sender,
    receiver) percent of its segments."""
    return [link(s, r, speed(s, r), loss_pct=loss(s, r)) for rnd in schedule(hosts)
            for s, r in rnd]


def slow_host(name: str, rate: float = 0.1 * G, fast: float = 10 * G, both: bool = True,
              ) -> Callable[[str, str], float]:
    """A speed function: name's links at rate (sending, and receiving if both), others fast."""
    def speed(s: str, r: str) -> float:
        return rate if s == name or (both and r == name) else fast
    return speed


# A survey of three hosts slowed unevenly all over (the rig's CPUs taken by other work): each
# host is below 75 % of the median host's best in some direction, so none is free of
# suspicion. Figures in Mbit/s.
UNEVEN = {("g1", "g2"): 379, ("g1", "g3"): 370, ("g2", "g1"): 1000,
          ("g2", "g3"): 538, ("g3", "g1"): 591, ("g3", "g2"): 508}


def uneven(retests: Sequence[tuple[str, str, float]] = ()) -> list[LinkRun]:
    """The UNEVEN survey, and retests (sender, receiver, Mbit/s)."""
    return [link(s, r, bps * 1e6) for (s, r), bps in UNEVEN.items()] + [
        link(s, r, bps * 1e6, RETEST) for s, r, bps in retests]


REFUSED = HostFailure(Stage.CONNECT, "connection refused at 10.0.0.9:22 (is sshd running?)")
__all__ = ["gpu", "paddle", "cpu", "host_facts", "cluster", "same", "REFUSED", "replace",
           "HOSTILE", "G", "link", "survey", "slow_host", "UNEVEN", "uneven"]


# ---------------------------------------------------------------- shared by the check tests
MIB = 1 << 20
NODES = ["node01", "node02", "node03", "node04"]
AUDIT_NOW = 1795000000.0  # the audits' "now" (checks read no clock)


def messages(findings: Iterable[Finding], status: Status) -> list[str]:
    """Returns the messages of the findings with a status, in order."""
    return [f.message for f in findings if f.status is status]


def net_facts(mtu: int = 1500, address: str = "10.0.0.1", name: str = "eth0",
              ib: Sequence[str] = (), speed_mbps: Optional[int] = None) -> F.NetworkFacts:
    """Network facts: one NIC holding address (the default route's) and loopback."""
    return F.NetworkFacts((F.Interface(name, mtu, "up", speed_mbps, (f"{address}/24",)),
                           F.Interface("lo", 65536, "unknown", None, ("127.0.0.1/8",))),
                          default_route=name, infiniband=tuple(ib))


def devices(g: F.GpuFacts, **changes: Any) -> F.GpuFacts:
    """g with changes applied to GPU 0 (the others stay as they are)."""
    d0 = replace(g.devices[0], **changes)
    return replace(g, devices=(d0, *g.devices[1:]))


def net_tests(links: Iterable[LinkRun], allreduce: Optional[AllReduce] = None,
              skipped: Optional[dict[str, str]] = None, hosts: Sequence[str] = NODES,
              ar_skipped: Optional[str] = None) -> NetworkTests:
    """What the active tests would return for these runs (a ring over hosts)."""
    return NetworkTests("ring", tuple(hosts), tuple(links), allreduce, ar_skipped,
                        skipped or {})


def with_network(net: NetworkTests, **limits: Any) -> Cluster:
    """A cluster of alike hosts, one per host of net, with its measurements and limits."""
    return replace(cluster(**same(len(net.hosts))), network=net,
                   policy=replace(Policy(), limits=replace(Limits(), **limits)))


def good_cluster() -> Cluster:
    """Four alike hosts whose every ring link runs at 9.4 Gbit/s (a baseline's cluster)."""
    return replace(cluster(**same(4)), network=net_tests(survey(NODES, lambda s, r: 9.4 * G)))


def interruptible() -> None:
    """preexec_fn of a process a test interrupts with SIGINT: the default disposition,
    whatever the test run inherited (a background job starts with SIGINT ignored, and an
    ignored signal stays ignored across exec, so Ctrl-C would never reach preflight)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def report_doc(c: Cluster, judgement: Any, plan: Any = None, **run: Any) -> dict[str, Any]:
    """The JSON document of a judged cluster's report, as a run writes it (run: the run's
    own fields, started_at, fail_on...)."""
    from preflight.report import build, jsonreport  # the report stage, above the model
    doc: dict[str, Any] = json.loads(json.dumps(jsonreport.encode(
        replace(build.report(c, judgement, plan), **run))))
    return doc


def procs_with_env(key: str, value: str) -> list[int]:
    """The pids of this machine's processes whose environment holds key=value: a test's own
    children, told apart from those of a test running beside it."""
    want = f"{key}={value}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if want in fh.read().split(b"\0"):
                    out.append(int(name))
        except OSError:
            continue
    return out
