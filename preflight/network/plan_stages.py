"""The stages run on the plan so far, once the links are measured: for a PS plan the fan-in
of each server host and the PS round (its job run for real, in place of the all-reduce),
and for every plan each host's ports reached from the plan's other hosts."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Optional

from preflight.common import localise
from preflight.common.ps_failure import hung_without_cause
from preflight.common.remote import Remote
from preflight.common.units import hosts_text
from preflight.model.facts import PaddleFacts
from preflight.model.host import HostOutcome
from preflight.model.measure import NOT_COLLECTIVE, NetworkTests
from preflight.model.plan import Plan
from preflight.model.policy import Limits
from preflight.network.allreduce_watch import OnProgress
from preflight.network.fanin import fanin_pairs, run_fanin
from preflight.network.orchestrate import NetworkOptions
from preflight.network.paddle_job import Member
from preflight.network.port_reach import run_port_reach
from preflight.network.ps_round import run_ps_round


def run_fanin_stage(net: NetworkTests, plan: Plan, remotes: Mapping[str, Remote],
                    opts: NetworkOptions, limits: Limits,
                    on_step: Optional[OnProgress] = None) -> NetworkTests:
    """Returns net with the fan-in of each server host of a PS plan (none otherwise); one
    below the warn ratio of what a healthy host's link carries is measured again."""
    pairs = fanin_pairs(plan)
    if net.interrupted or plan.mode != "ps" or not pairs:
        return net
    started = time.monotonic()
    addresses = {e.host: e.address for e in (*plan.servers, *plan.workers)}
    if on_step:
        on_step(f"iperf3 fan-in to {len(pairs)} PS server host(s)", 0, 0)
    try:
        survey = localise.measured(net.links)
        ref = localise.reference_bps(survey, net.line_bps()) if survey else None
        fanin = run_fanin(plan, remotes, addresses, opts.iperf.rate_only(),
                          None if ref is None else limits.link_warn_ratio * ref)
    except KeyboardInterrupt:
        return replace(net, interrupted=True)
    return replace(net, fanin=fanin, wall_s=net.wall_s + time.monotonic() - started)


def run_reach_stage(net: NetworkTests, plan: Plan, outcomes: Sequence[HostOutcome],
                    remotes: Mapping[str, Remote],
                    on_step: Optional[OnProgress] = None) -> NetworkTests:
    """Returns net with each plan host's ports reached from the plan's other hosts."""
    if net.interrupted or len(plan.nodes) < 2:
        return net
    started = time.monotonic()
    pythons = {o.host.name: o.host.probe_python for o in outcomes}
    if on_step:
        on_step(f"the plan's ports from host to host ({len(plan.nodes)} hosts)", 0, 0)
    try:
        reach = run_port_reach(plan, remotes, pythons, plan.roles())
    except KeyboardInterrupt:
        return replace(net, interrupted=True)
    return replace(net, reach=reach, wall_s=net.wall_s + time.monotonic() - started)


def run_ps_stage(net: NetworkTests, plan: Plan, outcomes: Sequence[HostOutcome],
                 remotes: Mapping[str, Remote], opts: NetworkOptions,
                 on_step: Optional[OnProgress] = None) -> NetworkTests:
    """Returns net with a PS plan's round (its PS job run for real), in place of the
    all-reduce: a PS job's traffic is pushes and pulls, never a collective."""
    if plan.mode != "ps":
        return net
    net = replace(net, allreduce_skipped=NOT_COLLECTIVE)
    if net.interrupted or not opts.run_allreduce:
        return net
    in_plan = set(plan.hosts())
    why = _no_ps_core([o for o in outcomes if o.host.name in in_plan])
    if why is None and not (plan.servers and plan.workers):
        # A plan left empty by builds without the PS core says so, not just "empty".
        why = _no_ps_core(outcomes) or "the plan has no server and trainer to run it on"
    if why is not None:
        return replace(net, ps_skipped=why)
    by_name = {o.host.name: o for o in outcomes}
    members = {n.host: Member(n.host, remotes[n.host], n.python, n.address,
                              container=n.container,
                              host_python=by_name[n.host].host.probe_python)
               for n in plan.nodes if n.host in remotes and n.host in by_name}
    started = time.monotonic()
    if on_step:
        on_step(f"PS round: {len(plan.servers)} server(s), {len(plan.workers)} trainer(s)",
                0, 0)
    try:
        result = run_ps_round(plan, members, opts.ps)
        if hung_without_cause(result):
            result = replace(run_ps_round(plan, members, opts.ps), attempts=2)
    except KeyboardInterrupt:
        return replace(net, interrupted=True)
    return replace(net, ps=result, wall_s=net.wall_s + time.monotonic() - started)


def _no_ps_core(outcomes: Sequence[HostOutcome]) -> Optional[str]:
    """Why these hosts cannot run a PS job, where Paddle's build lacks the PS core on some
    (the 3.1+ CPU wheels): the round would fail in Paddle's own import, saying nothing new."""
    lacking: dict[str, list[str]] = {}
    for o in outcomes:
        p = o.facts.paddle if o.facts is not None else None
        if isinstance(p, PaddleFacts) and p.available and p.ps_core is False:
            lacking.setdefault(p.version or "?", []).append(o.host.name)
    if not lacking:
        return None
    return "; ".join(f"Paddle {v} on {hosts_text(h)} has no parameter-server core "
                     "(CommContext and DistCommunicator are not compiled in)"
                     for v, h in lacking.items())
