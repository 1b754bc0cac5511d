"""Facts and findings -> the placement plan. Pure: no connection, no clock, no DNS (the
caller passes each host's IP).

Collective: the workers are the largest set of hosts alike in GPUs and Paddle stack, in
inventory order, each running the same number of ranks. PS: trainers spread evenly over that
set; servers where CPU headroom allows, fewest per host first, on hosts without trainers when
there are some, then the best-connected. Ports are picked free per host from Paddle's default
ranges (or the policy's ports)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from preflight.common.localise import measured
from preflight.common.units import rate
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
from preflight.model.plan import Endpoint, Plan
from preflight.model.policy import MASTER_PORTS_FROM, RANK_PORTS_FROM, Policy
from preflight.placement.cost import straggler_costs
from preflight.placement.launcher import collective_node, ps_node

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


def _largest_alike(hosts: Sequence[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """Returns (the largest group of one kind, the rest); a tie goes to the group holding
    the earliest host, so the choice is stable."""
    groups: dict[tuple[object, ...], list[Candidate]] = {}
    for c in hosts:
        groups.setdefault(c.kind, []).append(c)
    if not groups:
        return [], []
    best = max(groups.values(), key=lambda g: (len(g), -g[0].order))
    return best, [c for c in hosts if c.kind != best[0].kind]


def _free_ports(c: Candidate, n: int, allowed: Optional[Sequence[int]], start: int,
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


def plan(cluster: Cluster, findings: Sequence[Finding], ips: Mapping[str, str]) -> Plan:
    """Returns the best plan for the policy's job on the hosts that passed."""
    excluded = {h: list(r) for h, r in exclusions(cluster, findings).items()}
    cands, left = candidates(cluster, excluded, ips)
    excluded.update(left)
    policy = cluster.policy
    made = (_ps if policy.mode == "ps" else _collective)(cluster, cands, excluded, policy)
    # Where the job runs in a container, each host's launcher runs in it, started as the job's.
    boxes = {o.host.name: o.host.container for o in cluster.outcomes}
    nodes = tuple(replace(n, container=boxes.get(n.host)) for n in made.nodes)
    return replace(made, nodes=nodes, costs=straggler_costs(made, cluster.network))


def _exclude(excluded: dict[str, list[str]], hosts: Sequence[Candidate], why: str) -> None:
    for c in hosts:
        excluded.setdefault(c.name, []).append(why.format(host=c.name, kind=describe(c.kind)))


def _alike_workers(cands: Sequence[Candidate], excluded: dict[str, list[str]], mode: str,
                   ) -> tuple[list[Candidate], list[Candidate]]:
    """Returns (the largest alike set of hosts that may be workers, the other such hosts)."""
    if mode == "collective":
        _exclude(excluded, [c for c in cands if "worker" not in c.roles],
                 "roles: server only (collective jobs have workers only)")
    return _largest_alike([c for c in cands if "worker" in c.roles])


def _collective(cluster: Cluster, cands: list[Candidate], excluded: dict[str, list[str]],
                policy: Policy) -> Plan:
    shape = policy.job
    inventory_workers = sum(1 for o in cluster.outcomes if "worker" in o.host.roles)
    fitting = []
    for c in cands:
        if shape.nproc_per_node and c.gpus and c.gpus < shape.nproc_per_node:
            _exclude(excluded, [c], f"has {c.gpus} GPUs; the job runs {shape.nproc_per_node} "
                     "ranks a host")
        else:
            fitting.append(c)
    group, odd = _alike_workers(fitting, excluded, "collective")
    if group:
        _exclude(excluded, odd, "{kind} differs from the workers' " + describe(group[0].kind)
                 + " (the largest alike set)")
    # Ranks per host: as asked, else a GPU each, else the inventory's slots (a hostfile's
    # slots=N, as mpirun reads it; the smallest, since every host runs the same count).
    slots = [c.slots for c in group]
    nproc = shape.nproc_per_node or (group[0].gpus if group and group[0].gpus else None) \
        or (min(s for s in slots if s) if slots and all(slots) else None) or 1
    allowed = policy.ports
    chosen: list[Candidate] = []
    blocks: dict[str, list[int]] = {}
    for c in group:
        if shape.nnodes is not None and len(chosen) == shape.nnodes:
            _exclude(excluded, [c], f"not needed: the job asks for {shape.nnodes} worker hosts")
            continue
        # The launcher picks each rank's port (and rank 0's store) within PORT_RANGE: a block
        # of nproc+1 ports verified free here.
        block = _free_ports(c, nproc + 1, allowed, RANK_PORTS_FROM, consecutive=True)
        if block is None:
            _exclude(excluded, [c], f"no {nproc + 1} consecutive free ports from "
                     f"{RANK_PORTS_FROM if allowed is None else 'the policy ports'}")
            continue
        c.ports.extend(block)
        blocks[c.name] = block
        chosen.append(c)
    master_port = None
    while chosen and master_port is None:
        got = _free_ports(chosen[0], 1, allowed, MASTER_PORTS_FROM, consecutive=False)
        if got is None:
            _exclude(excluded, [chosen[0]], "no free port left for the launcher's master")
            chosen.pop(0)
        else:
            master_port = got[0]
            chosen[0].ports.append(master_port)
    lacks = []
    wanted = shape.nnodes if shape.nnodes is not None else inventory_workers
    if len(chosen) < wanted:
        what = "requested" if shape.nnodes is not None else "in the inventory"
        lacks.append(f"{wanted} worker hosts {what}, {len(chosen)} fit")
    master = f"{chosen[0].ip}:{master_port}" if chosen else None
    nodes = tuple(collective_node(c.name, c.ip, c.python, rank, len(chosen), nproc,
                                  master or "", blocks[c.name], tuple(sorted(c.ports)),
                                  c.gloo_ifname, c.facts.nccl_interface(c.ip) if c.gpus else None,
                                  c.facts.gpu_labels()[:nproc] if c.gpus and nproc else ())
                  for rank, c in enumerate(chosen))
    return Plan("collective", shape, nodes,
                workers=tuple(Endpoint(c.name, c.ip, blocks[c.name][0]) for c in chosen),
                master=master, nproc_per_node=nproc, excluded=_tupled(excluded),
                lacks=tuple(lacks))


def _tupled(excluded: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {h: tuple(r) for h, r in excluded.items()}


def _prefix_clash(hosts: Sequence[Candidate]) -> Optional[tuple[Candidate, Candidate]]:
    """Returns (kept, clashing) when one plan address is a string prefix of another: Paddle's
    PS controller picks a host's endpoints with startswith, so 10.0.0.1 would also start
    10.0.0.12's processes."""
    for a in hosts:
        for b in hosts:
            if a is not b and b.ip.startswith(a.ip):
                return (a, b) if a.order < b.order else (b, a)
    return None


def _ps(cluster: Cluster, cands: list[Candidate], excluded: dict[str, list[str]],
        policy: Policy) -> Plan:
    inventory_workers = sum(1 for o in cluster.outcomes if "worker" in o.host.roles)
    # The inventory's word on who serves: the hosts that may, and those it pins to serving.
    serving = Serving(tuple(o.host.name for o in cluster.outcomes if "server" in o.host.roles),
                      tuple(o.host.name for o in cluster.outcomes if o.host.roles == ("server",)))
    pool = list(cands)
    for _ in range(len(cands) + 1):  # each pass drops one clashing host: bounded
        result = _ps_place(pool, excluded, policy, inventory_workers, serving)
        clash = _prefix_clash([c for c in pool if c.servers or c.trainers])
        if clash is None:
            return result
        kept, dropped = clash
        pool.remove(dropped)
        excluded[dropped.name] = [f"address {dropped.ip} and {kept.name}'s {kept.ip}: one is "
                                  "a string prefix of the other, and Paddle's PS launcher "
                                  "matches endpoints by prefix"]
        for c in pool:
            c.servers = c.trainers = 0
            c.ports.clear()
    return result


@dataclass(frozen=True)
class Serving:
    """The inventory's hosts that may serve (roles with server), and those pinned to it
    (roles: [server] alone)."""

    may: tuple[str, ...]
    pinned: tuple[str, ...]


def _no_server_host(k: int, server_num: int, may_serve: Sequence[Candidate], spare: Any,
                    need: float, stack: bool, serving: Serving,
                    excluded: Mapping[str, Sequence[str]]) -> str:
    """Why server k+1 has no host: the hosts that may serve were left out (named, with their
    role and reason), or have no cores left for it."""
    lost = [h for h in serving.may if h in excluded]
    if lost:
        why = "; ".join(f"{h} ({'pinned as a server' if h in serving.pinned else 'may serve'}"
                        f") is left out: {excluded[h][0]}" for h in lost)
        return (f"server {k + 1} of {server_num}: no other host may serve: {why} (servers "
                f"share a host only when server_num exceeds the {len(serving.may)} hosts the "
                "inventory lets serve)")
    free = [c for c in may_serve if stack or not c.servers]
    best = max(free, key=spare, default=None)
    most = (f" (most: {best.name}, {max(0.0, spare(best)):g} after its trainers and "
            "servers)") if best else ""
    return f"server {k + 1} of {server_num}: no host has {need:g} free cores for it{most}"


def _server_notes(pool: Sequence[Candidate], serving: Serving,
                  excluded: Mapping[str, Sequence[str]], server_num: int) -> list[str]:
    """What the plan says of its servers: a host that serves in place of a pinned server
    that was left out, and hosts that carry several (what each then gets)."""
    notes = []
    lost = [h for h in serving.pinned if h in excluded]
    hosts = ", ".join(c.name for c in pool if c.servers)
    if hosts and any(c.servers for c in pool if c.name not in serving.pinned):
        notes += [f"{gone}, pinned as a server by the inventory, is left out ("
                  f"{excluded[gone][0]}): the servers run on {hosts} instead" for gone in lost]
    for c in pool:
        if c.servers > 1:
            link = (f" {rate(c.link_bps / c.servers)} of its link and" if c.link_bps else "")
            may = len(serving.may)
            notes.append(f"{c.name} runs {c.servers} servers (server_num {server_num}, "
                         f"{may} host{'' if may == 1 else 's'} may serve): each gets{link} "
                         f"{c.free_cores / c.servers:.2g} of its {c.free_cores:g} free cores")
    return notes


def _ps_place(pool: list[Candidate], excluded: dict[str, list[str]], policy: Policy,
              inventory_workers: int, serving: Serving = Serving((), ())) -> Plan:
    shape, limits = policy.job, policy.limits
    excluded = {h: list(r) for h, r in excluded.items()}  # this attempt's own copy
    workers, others = _alike_workers(pool, excluded, "ps")
    trainer_num = shape.trainer_num or inventory_workers
    server_num = shape.server_num or 1
    lacks: list[str] = []
    notes: list[str] = []
    if not workers:
        lacks.append(f"{trainer_num} trainers requested, no worker host fits")
    else:
        # Trainers first on the hosts that may not serve: one that may is then left to a
        # server alone, not given a trainer to fight while another host stays idle.
        may = {c.name for c in pool if "server" in c.roles and c.name not in excluded
               and not c.overloaded}
        use = sorted(workers, key=lambda c: c.name in may)[:trainer_num]
        for k in range(trainer_num):  # the first hosts get one more when it does not divide
            use[k % len(use)].trainers += 1
        if trainer_num > len(use):
            notes.append(f"{trainer_num} trainers on {len(use)} hosts: up to "
                         f"{math.ceil(trainer_num / len(use))} a host")
    may_serve = []
    for c in pool:
        if "server" not in c.roles or c.name in excluded:
            continue
        if c.overloaded:
            notes.append(f"{c.name}: no server here: overloaded ({c.free_cores:g} cores free "
                         f"of {c.effective:g})")
            continue
        may_serve.append(c)
    need, t_need = limits.ps_server_cores, limits.ps_trainer_cores

    def spare(c: Candidate) -> float:
        """Cores left on c after what the plan has put there so far."""
        return c.free_cores - c.servers * need - c.trainers * t_need

    # Two servers on one host halve its NIC and cores for each: only when the job asks for
    # more servers than the inventory has hosts that may serve.
    stack = server_num > len(serving.may)
    for k in range(server_num):
        fits = [c for c in may_serve if spare(c) - need >= -1e-9 and (stack or not c.servers)]
        if not fits:
            lacks.append(_no_server_host(k, server_num, may_serve, spare, need, stack,
                                         serving, excluded))
            break
        # Spread first; then a host without trainers (no contention); then the best links.
        host = min(fits, key=lambda c: (c.servers, c.trainers > 0,
                                        -(c.link_bps or 0.0), -c.free_cores, c.order))
        host.servers += 1
    notes += _server_notes(pool, serving, excluded, server_num)
    placed = [c for c in pool if c.servers or c.trainers]
    servers: list[Endpoint] = []
    trainers: list[Endpoint] = []
    gloo_port = None
    for c in placed:
        got = _free_ports(c, c.servers + c.trainers, policy.ports, RANK_PORTS_FROM,
                          consecutive=False)
        if got is None:
            lacks.append(f"{c.name}: not {c.servers + c.trainers} free ports")
            continue
        c.ports.extend(got)
        servers += [Endpoint(c.name, c.ip, p) for p in got[:c.servers]]
        trainers += [Endpoint(c.name, c.ip, p) for p in got[c.servers:]]
    if servers:
        first = next(c for c in placed if c.name == servers[0].host)
        got = _free_ports(first, 1, policy.ports, MASTER_PORTS_FROM, consecutive=False)
        if got is None:
            lacks.append(f"{first.name}: no free port for gloo's rendezvous")
        else:
            gloo_port = got[0]
            first.ports.append(gloo_port)
    for c in pool:
        if c.name not in excluded and not (c.servers or c.trainers):
            why = "not needed: the job's trainers and servers fit elsewhere"
            if c in others and workers:
                why = (f"{describe(c.kind)} differs from the trainers' {describe(workers[0].kind)}"
                       f"; {why}")
            excluded[c.name] = [why]
    nodes = tuple(ps_node(c.name, c.ip, c.python, rank, servers, trainers, gloo_port or 0,
                          tuple(sorted(c.ports)), c.gloo_ifname)
                  for rank, c in enumerate(placed))
    return Plan("ps", shape, nodes, workers=tuple(trainers), servers=tuple(servers),
                excluded=_tupled(excluded), lacks=tuple(lacks), notes=tuple(notes))
