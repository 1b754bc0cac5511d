"""The plan of a parameter-server job: trainers spread evenly over the largest alike set;
servers where CPU headroom allows, fewest per host first, on hosts without trainers when there
are some, then the best-connected; the inventory's pinned servers kept or said left out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from preflight.common.units import rate
from preflight.model.cluster import Cluster
from preflight.model.plan import Endpoint, Plan
from preflight.model.policy import MASTER_PORTS_FROM, RANK_PORTS_FROM, Policy
from preflight.placement.candidates import (
    Candidate,
    alike_workers,
    describe,
    free_ports,
    tupled,
)
from preflight.placement.launcher import ps_node


def _prefix_clash(hosts: Sequence[Candidate]) -> Optional[tuple[Candidate, Candidate]]:
    """Returns (kept, clashing) when one plan address is a string prefix of another: Paddle's
    PS controller picks a host's endpoints with startswith, so 10.0.0.1 would also start
    10.0.0.12's processes."""
    for a in hosts:
        for b in hosts:
            if a is not b and b.ip.startswith(a.ip):
                return (a, b) if a.order < b.order else (b, a)
    return None



def ps_plan(cluster: Cluster, cands: list[Candidate], excluded: dict[str, list[str]],
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
    workers, others = alike_workers(pool, excluded, "ps")
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
        got = free_ports(c, c.servers + c.trainers, policy.ports, RANK_PORTS_FROM,
                          consecutive=False)
        if got is None:
            lacks.append(f"{c.name}: not {c.servers + c.trainers} free ports")
            continue
        c.ports.extend(got)
        servers += [Endpoint(c.name, c.ip, p) for p in got[:c.servers]]
        trainers += [Endpoint(c.name, c.ip, p) for p in got[c.servers:]]
    if servers:
        first = next(c for c in placed if c.name == servers[0].host)
        got = free_ports(first, 1, policy.ports, MASTER_PORTS_FROM, consecutive=False)
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
                excluded=tupled(excluded), lacks=tuple(lacks), notes=tuple(notes))
