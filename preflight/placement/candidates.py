"""The hosts a plan may use: each that passed, as a Candidate (its GPUs, Paddle stack, roles,
ports in use, its links' score), the largest set alike among them, the free ports of each, and
why each of the others is left out. Shared by the collective plan (planner.py) and the PS
plan (ps_plan.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from preflight.common.localise import measured
from preflight.model.cluster import Cluster
from preflight.model.facts import (
    CpuFacts,
    GpuFacts,
    HostFacts,
    PaddleFacts,
    PortsFacts,
)
from preflight.model.findings import BLOCKING, Finding
from preflight.model.measure import NetworkTests

PORT_SEARCH = 1000  # how far above a default port the plan looks for free ones



@dataclass
class Candidate:
    """A host that passed: what the planner weighs, and what it gave the host so far."""

    name: str
    ip: str
    python: str
    order: int
    roles: tuple[str, ...]
    facts: HostFacts
    gpus: int
    kind: tuple[object, ...]
    effective: float  # cores the host may use (affinity, cgroup quota)
    free_cores: float  # effective cores minus what other work used over the probe's sample
    overloaded: bool
    link_bps: Optional[float]  # its slowest measured link; None: not measured
    gloo_ifname: Optional[str]
    taken: frozenset[int] = frozenset()
    servers: int = 0
    trainers: int = 0
    ports: list[int] = field(default_factory=list)
    slots: Optional[int] = None  # ranks the inventory gives it (a hostfile's slots=N)



def _kind(facts: HostFacts) -> tuple[object, ...]:
    """What must be alike on every worker: GPUs (model, count, memory, CC, driver), Paddle."""
    gpu, paddle = facts.gpu, facts.paddle
    if isinstance(gpu, GpuFacts) and gpu.devices:
        d = gpu.devices
        g: tuple[object, ...] = (len(d), tuple(sorted({x.name for x in d})),
                                 min(x.memory_total_mib or 0 for x in d),
                                 tuple(sorted({x.compute_capability or "?" for x in d})),
                                 gpu.driver)
    else:
        g = (0,)
    p = ((paddle.version, paddle.cuda, paddle.cudnn, paddle.nccl, paddle.python)
         if isinstance(paddle, PaddleFacts) else None)
    return (*g, p)



def describe(kind: Sequence[object]) -> str:
    """Returns '8x A100 80 GiB (CC 8.0), driver 550.54; Paddle 3.3.1' for a kind."""
    paddle = kind[-1]
    stack = f"Paddle {paddle[0]}" if isinstance(paddle, tuple) else "no Paddle facts"
    if kind[0] == 0:
        return f"no GPU; {stack}"
    n, names, mem, ccs, driver = kind[:5]
    return (f"{n}x {'/'.join(names)} {mem} MiB (CC {'/'.join(ccs)}), "  # type: ignore[arg-type]
            f"driver {driver}; {stack}")



def exclusions(cluster: Cluster, findings: Sequence[Finding]) -> dict[str, list[str]]:
    """Returns {host: reasons} for every host that could not be checked or that a blocking
    finding names, in inventory order."""
    out: dict[str, list[str]] = {}
    for o in cluster.outcomes:
        if o.failure is not None:
            out.setdefault(o.host.name, []).append(
                f"could not check ({o.failure.stage.value}): {o.failure.reason}")
    for f in findings:
        if f.status in BLOCKING:
            for h in f.hosts:
                reasons = out.setdefault(h, [])
                if f"{f.check}: {f.message}" not in reasons:
                    reasons.append(f"{f.check}: {f.message}")
    order = {o.host.name: i for i, o in enumerate(cluster.outcomes)}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))



def _link_scores(network: Optional[NetworkTests]) -> dict[str, float]:
    """Returns each host's slowest measured link (either direction) in bits/s."""
    out: dict[str, float] = {}
    for r in measured(network.links) if network else []:
        assert r.bps is not None
        for h in (r.sender, r.receiver):
            out[h] = min(out.get(h, r.bps), r.bps)
    return out



def candidates(cluster: Cluster, excluded: Mapping[str, Sequence[str]],
               ips: Mapping[str, str]) -> tuple[list[Candidate], dict[str, list[str]]]:
    """Returns the hosts the plan may use, and {host: reason} for the others that passed."""
    links = _link_scores(cluster.network)
    busy = cluster.policy.limits.cpu_busy_ratio
    out: list[Candidate] = []
    left: dict[str, list[str]] = {}
    for i, o in enumerate(cluster.outcomes):
        f = o.facts
        if f is None or o.host.name in excluded:
            continue
        name = o.host.name
        ip = ips.get(name)
        if ip is None:
            left[name] = [f"cannot resolve {o.host.address}"]
            continue
        if ":" in ip:
            left[name] = [f"IPv6 address {ip}: Paddle's launcher endpoints are IPv4 ip:port"]
            continue
        if not isinstance(f.ports, PortsFacts):
            left[name] = ["listening ports unknown: no free port can be chosen"]
            continue
        cpu = f.job_cpu()  # its container's cores where it runs in one (--cpus, a cpuset)
        effective, free, over = 0.0, 0.0, True
        if isinstance(cpu, CpuFacts):
            # What other work used where the job will run (its cgroup, else its CPUs), net of
            # the probe itself: not the kernel-wide load average, which in a container charges
            # one quota with the whole machine's load and counts I/O wait.
            effective, free = cpu.effective, cpu.free_cores
            over = cpu.effective <= 0 or (cpu.effective - free) / cpu.effective >= busy
        python = f.paddle.interpreter if isinstance(f.paddle, PaddleFacts) else o.host.python
        gpus = f.visible_gpus()  # CUDA_VISIBLE_DEVICES decides, where it is set
        out.append(Candidate(name, ip, python, i, o.host.roles, f, gpus, _kind(f),
                             effective, round(free, 2), over, links.get(name), f.gloo_interface(ip),
                             frozenset(f.ports.tcp), slots=o.host.slots))
    return out, left



def largest_alike(hosts: Sequence[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """Returns (the largest group of one kind, the rest); a tie goes to the group holding
    the earliest host, so the choice is stable."""
    groups: dict[tuple[object, ...], list[Candidate]] = {}
    for c in hosts:
        groups.setdefault(c.kind, []).append(c)
    if not groups:
        return [], []
    best = max(groups.values(), key=lambda g: (len(g), -g[0].order))
    return best, [c for c in hosts if c.kind != best[0].kind]



def free_ports(c: Candidate, n: int, allowed: Optional[Sequence[int]], start: int,
                consecutive: bool) -> Optional[list[int]]:
    """Returns n ports free on the host (not listening, not given out), lowest first."""
    pool = sorted(allowed) if allowed is not None else range(start, start + PORT_SEARCH)
    ok = [p for p in pool if p not in c.taken and p not in c.ports]
    if not consecutive:
        return ok[:n] if len(ok) >= n else None
    have = set(ok)
    for p in ok:
        if all(p + k in have for k in range(n)):
            return list(range(p, p + n))
    return None



def exclude(excluded: dict[str, list[str]], hosts: Sequence[Candidate], why: str) -> None:
    for c in hosts:
        excluded.setdefault(c.name, []).append(why.format(host=c.name, kind=describe(c.kind)))



def alike_workers(cands: Sequence[Candidate], excluded: dict[str, list[str]], mode: str,
                   ) -> tuple[list[Candidate], list[Candidate]]:
    """Returns (the largest alike set of hosts that may be workers, the other such hosts)."""
    if mode == "collective":
        exclude(excluded, [c for c in cands if "worker" not in c.roles],
                 "roles: server only (collective jobs have workers only)")
    return largest_alike([c for c in cands if "worker" in c.roles])



def tupled(excluded: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {h: tuple(r) for h, r in excluded.items()}
