"""Facts and findings -> the placement plan. Pure: no connection, no clock, no DNS (the
caller passes each host's IP).

Collective: the workers are the largest set of hosts alike in GPUs and Paddle stack, in
inventory order, each running the same number of ranks. PS: trainers spread evenly over that
set; servers where CPU headroom allows, fewest per host first, on hosts without trainers when
there are some, then the best-connected. Ports are picked free per host from Paddle's default
ranges (or the policy's ports)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from preflight.model.cluster import Cluster
from preflight.model.findings import Finding
from preflight.model.plan import Endpoint, Plan
from preflight.model.policy import MASTER_PORTS_FROM, RANK_PORTS_FROM, Policy
from preflight.placement.candidates import (
    Candidate,
    alike_workers,
    candidates,
    describe,
    exclude,
    exclusions,
    free_ports,
    tupled,
)
from preflight.placement.cost import straggler_costs
from preflight.placement.launcher import collective_node
from preflight.placement.ps_plan import ps_plan


def plan(cluster: Cluster, findings: Sequence[Finding], ips: Mapping[str, str]) -> Plan:
    """Returns the best plan for the policy's job on the hosts that passed."""
    excluded = {h: list(r) for h, r in exclusions(cluster, findings).items()}
    cands, left = candidates(cluster, excluded, ips)
    excluded.update(left)
    policy = cluster.policy
    made = (ps_plan if policy.mode == "ps" else _collective)(cluster, cands, excluded, policy)
    # Where the job runs in a container, each host's launcher runs in it, started as the job's.
    boxes = {o.host.name: o.host.container for o in cluster.outcomes}
    nodes = tuple(replace(n, container=boxes.get(n.host)) for n in made.nodes)
    return replace(made, nodes=nodes, costs=straggler_costs(made, cluster.network))



def _collective(cluster: Cluster, cands: list[Candidate], excluded: dict[str, list[str]],
                policy: Policy) -> Plan:
    shape = policy.job
    inventory_workers = sum(1 for o in cluster.outcomes if "worker" in o.host.roles)
    fitting = []
    for c in cands:
        if shape.nproc_per_node and c.gpus and c.gpus < shape.nproc_per_node:
            exclude(excluded, [c], f"has {c.gpus} GPUs; the job runs {shape.nproc_per_node} "
                     "ranks a host")
        else:
            fitting.append(c)
    group, odd = alike_workers(fitting, excluded, "collective")
    if group:
        exclude(excluded, odd, "{kind} differs from the workers' " + describe(group[0].kind)
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
            exclude(excluded, [c], f"not needed: the job asks for {shape.nnodes} worker hosts")
            continue
        # The launcher picks each rank's port (and rank 0's store) within PORT_RANGE: a block
        # of nproc+1 ports verified free here.
        block = free_ports(c, nproc + 1, allowed, RANK_PORTS_FROM, consecutive=True)
        if block is None:
            exclude(excluded, [c], f"no {nproc + 1} consecutive free ports from "
                     f"{RANK_PORTS_FROM if allowed is None else 'the policy ports'}")
            continue
        c.ports.extend(block)
        blocks[c.name] = block
        chosen.append(c)
    master_port = None
    while chosen and master_port is None:
        got = free_ports(chosen[0], 1, allowed, MASTER_PORTS_FROM, consecutive=False)
        if got is None:
            exclude(excluded, [chosen[0]], "no free port left for the launcher's master")
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
                master=master, nproc_per_node=nproc, excluded=tupled(excluded),
                lacks=tuple(lacks))
