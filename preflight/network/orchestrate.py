"""The active tests: iperf3 survey, retests of suspects, then the all-reduce -> NetworkTests.

Measures only; checks/bandwidth.py and checks/allreduce.py judge. Interrupted, it stops its
servers and launchers and returns what it measured so far."""

from __future__ import annotations

import functools
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Optional

from preflight.common import localise
from preflight.common.remote import Remote, in_parallel
from preflight.model.facts import (
    HostFacts,
    NetworkFacts,
    PaddleFacts,
    PortsFacts,
)
from preflight.model.host import HostOutcome
from preflight.model.measure import (
    RETEST,
    SURVEY,
    Backend,
    LinkRun,
    NetworkTests,
    NicCounters,
    Schedule,
)
from preflight.model.policy import Limits
from preflight.network import nic
from preflight.network.allreduce import run_allreduce
from preflight.network.allreduce_cmd import DEFAULT_SIZES_MIB, NCCL_LARGE_MIB, AllReduceOptions
from preflight.network.allreduce_watch import OnProgress
from preflight.network.budget import launch_idle_s, plan_sizes
from preflight.network.iperf import IperfOptions, Servers, run_rounds
from preflight.network.paddle_job import Member
from preflight.network.ps_round import PsRoundOptions
from preflight.network.schedule import Pair, matrix_rounds, retest_rounds, ring_rounds

MAX_RETESTS = 32  # suspects beyond these stay unconfirmed; a run must stay bounded
# Each suspect is measured alone this many times, spread over the retest phase: a real
# deficit repeats, a moment of contention rarely does (the check keeps each pair's best).
RETEST_REPEATS = 2
# Up to this many suspects are retested one at a time. More (a survey whose many pairs at once
# contended for something they share: a switch's uplink, the hosts of a virtualised rig) run
# in rounds of at most RETEST_WIDTH pairs that share no host, so that retesting them all stays
# bounded: 32 suspects take 16 rounds, not 64.
RETEST_ONE_BY_ONE = 8
RETEST_WIDTH = 4


@dataclass(frozen=True)
class NetworkOptions:
    matrix: bool = False
    iperf: IperfOptions = IperfOptions()
    allreduce: AllReduceOptions = AllReduceOptions()
    run_allreduce: bool = True  # and, for a PS job, its round
    ps: PsRoundOptions = PsRoundOptions()


def _has_iperf3(remotes: Mapping[str, Remote]) -> dict[str, str]:
    """Returns {host: why not} for hosts where iperf3 cannot run."""
    why: dict[str, Optional[str]] = {}  # None: iperf3 is there

    def probe(name: str, remote: Remote) -> None:
        try:
            done = remote.run("command -v iperf3", timeout=10.0)
        except Exception as e:
            why[name] = f"could not run a command: {type(e).__name__}: {e}"
            return
        why[name] = ("no answer within 10 s" if done.exit is None else
                     "iperf3 is not installed" if done.exit != 0 else None)

    in_parallel([functools.partial(probe, n, r) for n, r in remotes.items()], 12.0, "which")
    missing: dict[str, str] = {}
    for name in remotes:
        if name not in why:
            missing[name] = "no answer to `command -v iperf3` within 12 s"
        elif why[name] is not None:
            missing[name] = str(why[name])
    return missing


def job_nics(outcomes: Sequence[HostOutcome]) -> tuple[dict[str, str], dict[str, int]]:
    """Returns each host's job interface ({host: name}) and the speed it negotiated
    ({host: Mb/s}, where the NIC reports one: virtual ones often do not)."""
    names: dict[str, str] = {}
    speeds: dict[str, int] = {}
    for o in outcomes:
        net = o.facts.network if o.facts is not None else None
        if not isinstance(net, NetworkFacts):
            continue
        iface = net.job_interface(o.ip or resolve_ip(o.host.address) or o.host.address)
        if iface is None:
            continue
        names[o.host.name] = iface.name
        if iface.speed_mbps and iface.speed_mbps > 0:
            speeds[o.host.name] = iface.speed_mbps
    return names, speeds


def retest_pairs(survey: Sequence[LinkRun], limits: Limits,
                 line_bps: Optional[Mapping[str, float]] = None,
                 ) -> tuple[list[Pair], Optional[Pair]]:
    """Returns the pairs to measure again, alone: each suspect host against one of the best
    hosts that passed (the best for the first, then in turn among the RETEST_WIDTH best, so
    that many suspects can be retested side by side) and each slow path itself; and the
    fastest healthy link to measure again among them (None: no suspect, or no healthy link),
    for the check to compare each suspect with what a healthy link reached in the same
    minutes, not only in the survey."""
    runs = localise.measured(survey)
    threshold = localise.suspect_threshold(runs, limits.link_warn_ratio,
                                              limits.link_min_gbps * 1e9, line_bps)
    if threshold is None:
        return [], None
    loc = localise.localise(runs, threshold, line_bps)
    out, into = localise.best_by_host(runs)
    blamed = set(loc.slow_hosts) | {h for p in loc.slow_paths for h in p}
    healthy = sorted((h for h in set(out) | set(into) if h not in blamed),
                     key=lambda h: (-max(out.get(h, 0.0), into.get(h, 0.0)), h))
    pairs: list[Pair] = []
    refs = healthy[:RETEST_WIDTH]
    for i, (host, directions) in enumerate(loc.slow_hosts.items()):
        if localise.SEND in directions:
            ref = refs[i % len(refs)] if refs else _partner(host, localise.SEND, loc, into)
            pairs.extend([(host, ref)] if ref else [])
        if localise.RECEIVE in directions:
            ref = refs[i % len(refs)] if refs else _partner(host, localise.RECEIVE, loc, out)
            pairs.extend([(ref, host)] if ref else [])
    pairs.extend(loc.slow_paths)
    pairs = list(dict.fromkeys(pairs))  # one suspect's retest may be another's too
    return pairs[:MAX_RETESTS], (loc.alongside(runs) if pairs else None)


def _partner(host: str, direction: str, loc: localise.Localisation,
             facing_best: Mapping[str, float]) -> Optional[str]:
    """Returns whom to retest a suspect against where no host is free of suspicion (every
    host slow in some direction: a survey slowed unevenly all over, as on hosts that share
    CPUs): the host best at the facing direction (receiving, for a suspect sender), one not
    suspect in it first. Unretested, a suspect could only be judged on the survey itself."""
    facing = localise.FACING[direction]
    others = [h for h in facing_best if h != host]
    return min(others, key=lambda h: (loc.suspect(h, facing), -facing_best[h], h), default=None)


def resolve_ip(address: str) -> Optional[str]:
    """Returns the IPv4/IPv6 address of an inventory address (resolving a DNS name)."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        try:
            return socket.gethostbyname(address)
        except OSError:
            return None


def allreduce_members(outcomes: Sequence[HostOutcome], remotes: Mapping[str, Remote],
                      port: int = AllReduceOptions.port,
                      ) -> tuple[list[Member], Backend, dict[str, str]]:
    """Returns (members, backend, {host: why it takes no part})."""
    left_out: dict[str, str] = {}
    cands: list[tuple[HostOutcome, HostFacts, PaddleFacts]] = []
    for o in outcomes:
        facts = o.facts
        if facts is None or o.host.name not in remotes:
            continue
        paddle = facts.paddle
        if not isinstance(paddle, PaddleFacts) or not paddle.available:
            left_out[o.host.name] = "Paddle is not importable"
        elif paddle.compiled_with_distribute is False:
            left_out[o.host.name] = "Paddle was built without distributed support"
        else:
            cands.append((o, facts, paddle))
    gpus = {o.host.name: f.visible_gpus() for o, f, _ in cands}
    backend: Backend = "gloo"
    nproc = 1
    if any(gpus.values()):
        # A GPU job runs on GPU hosts only: CPU-only hosts among them are left out, not mixed in.
        for o, _, _ in cands:
            if not gpus[o.host.name]:
                left_out[o.host.name] = "has no GPU while others do"
        cands = [c for c in cands if gpus[c[0].host.name]]
        backend, nproc = "nccl", min(gpus[o.host.name] for o, _, _ in cands)
    members = []
    # The launcher's ports: master, gloo, then rank 0's store and one per local rank. One
    # already taken would hang the run until its deadline; leaving the host out says why.
    needed = range(port, port + 3 + nproc)
    for o, facts, paddle in cands:
        held = sorted(set(needed) & set(facts.ports.tcp)) if isinstance(
            facts.ports, PortsFacts) else []
        if held:
            left_out[o.host.name] = (f"port {held[0]} is already in use (the all-reduce needs "
                                     f"{needed[0]}-{needed[-1]}; see --allreduce-port)")
            continue
        ip = o.ip or resolve_ip(o.host.address)
        if ip is None:
            left_out[o.host.name] = f"cannot resolve {o.host.address}"
            continue
        members.append(Member(o.host.name, remotes[o.host.name], paddle.interpreter, ip,
                              nproc, facts.gloo_interface(ip), o.host.container,
                              o.host.probe_python))
    return members, backend, left_out


@dataclass
class _Phase:
    text: str = ""
    done: int = 0
    total: int = 0


def run_link_tests(outcomes: Sequence[HostOutcome], remotes: Mapping[str, Remote],
                   limits: Limits, opts: NetworkOptions,
                   on_step: Optional[OnProgress] = None,
                   on_link: Optional[Callable[[LinkRun], None]] = None) -> NetworkTests:
    """Returns what the iperf3 survey and the retests of suspects measured (no all-reduce
    yet: it runs on the hosts the plan keeps, see run_allreduce_stage)."""
    started = time.monotonic()
    schedule: Schedule = "matrix" if opts.matrix else "ring"
    skipped: dict[str, str] = {}
    for o in outcomes:
        if o.facts is not None and o.host.name not in remotes:
            skipped[o.host.name] = "no connection left to run tests over"
    answered = [o for o in outcomes if o.facts is not None and o.host.name in remotes]
    names = [o.host.name for o in answered]
    addresses = {o.host.name: o.ip or o.host.address for o in answered}
    links: list[LinkRun] = []
    servers = Servers()
    interrupted = False
    n_rounds = 0
    interfaces, speeds = job_nics(answered)
    line = {h: mbps * 1e6 for h, mbps in speeds.items()}
    counters: dict[str, NicCounters] = {}

    phase = _Phase()  # what the progress bar shows

    def step(text: str, total: int = 0) -> None:
        phase.text, phase.done, phase.total = text, 0, total
        if on_step:
            on_step(text, 0, total)

    def measured(run: LinkRun) -> None:
        links.append(run)
        if on_link:
            on_link(run)
        phase.done += 1
        if on_step:
            on_step(phase.text, phase.done, phase.total)

    try:
        if len(names) < 2:
            return NetworkTests(schedule, tuple(names), (), None,
                                "needs 2 or more hosts that answered", skipped)
        skipped.update(_has_iperf3({n: remotes[n] for n in names}))
        iperf_hosts = [n for n in names if n not in skipped]
        rounds = (matrix_rounds if opts.matrix else ring_rounds)(iperf_hosts)
        step(f"iperf3 {schedule}, {len(rounds)} rounds over {len(iperf_hosts)} hosts: links",
             sum(len(r) for r in rounds))
        n_rounds = len(rounds)
        tested = {h: interfaces[h] for h in iperf_hosts if h in interfaces}
        before = nic.read_all(remotes, tested)
        run_rounds(rounds, remotes, addresses, opts.iperf, SURVEY, servers, measured, speeds)
        suspects, beside = retest_pairs(links, limits, line)
        if suspects:
            # No host in two pairs of a round (nothing shares a link's NICs), each pair again
            # after the others rather than twice in a row; the healthy link among them.
            width = 1 if len(suspects) <= RETEST_ONE_BY_ONE else RETEST_WIDTH
            again = retest_rounds([*suspects, *([beside] if beside else [])], RETEST_REPEATS,
                                  width)
            step(f"iperf3 retest of {len(suspects)} suspect link(s)"
                 + (" and a healthy one" if beside else "") + ": runs", len(again))
            n_rounds += len(again)
            run_rounds(again, remotes, addresses, opts.iperf.rate_only(), RETEST,
                       servers, measured, speeds)
        counters = nic.grown(before, nic.read_all(remotes, tested), tested)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        servers.stop_all()
    return NetworkTests(schedule, tuple(names), tuple(links), None,
                        None if opts.run_allreduce else "turned off", skipped, interrupted,
                        time.monotonic() - started, n_rounds, nic_mbps=speeds,
                        nic_counters=counters)


def _crowding(outcomes: Sequence[HostOutcome], members: Sequence[Member]) -> float:
    """The Paddle processes a core of the most crowded kernel will start at once (a launcher
    and its ranks a member), counting together the members that share one kernel (one
    neighbour table id: containers or namespaces on one machine) over their cores."""
    by_name = {o.host.name: o.facts for o in outcomes if o.facts is not None}
    kernels: dict[object, tuple[int, float]] = {}
    for m in members:
        facts = by_name.get(m.name)
        net = facts.network if facts is not None else None
        table = net.neighbour_table("ipv4") if isinstance(net, NetworkFacts) else None
        key = (table.table_id if table is not None and table.table_id is not None
               else ("host", m.name))
        cpu = facts.cpu if facts is not None else None
        cores = getattr(cpu, "effective", None) or 1.0
        procs, most = kernels.get(key, (0, 0.0))
        kernels[key] = (procs + 1 + m.nproc, max(most, float(cores)))
    return max((procs / cores for procs, cores in kernels.values()), default=1.0)


def _import_s(outcomes: Sequence[HostOutcome], names: set[str]) -> list[float]:
    """The time `import paddle` took in the probe on each of the named hosts that says."""
    out = []
    for o in outcomes:
        paddle = o.facts.paddle if o.facts is not None else None
        if o.host.name in names and isinstance(paddle, PaddleFacts) and paddle.import_s:
            out.append(paddle.import_s)
    return out


def run_allreduce_stage(net: NetworkTests, outcomes: Sequence[HostOutcome],
                        remotes: Mapping[str, Remote], opts: NetworkOptions,
                        keep: Optional[Mapping[str, str]] = None,
                        on_step: Optional[OnProgress] = None) -> NetworkTests:
    """Returns net with the all-reduce run over the hosts it can: `keep` maps the hosts the
    plan leaves out to why (they are not ranks). Sized to the budget from the slowest link
    among the ranks."""
    if not opts.run_allreduce or net.interrupted or net.allreduce_skipped:
        return net
    started = time.monotonic()
    left_by_plan = dict(keep or {})
    answered = [o for o in outcomes if o.facts is not None and o.host.name in remotes
                and o.host.name not in left_by_plan]
    skipped = dict(net.skipped)
    members, backend, left_out = allreduce_members(answered, remotes, opts.allreduce.port)
    for host, why in left_out.items():
        skipped.setdefault(host, f"no all-reduce: {why}")
    net = replace(net, skipped=skipped, allreduce_left_out=left_by_plan)
    if len(members) < 2:
        why = (f"needs 2 or more hosts with Paddle that the plan keeps, found {len(members)}"
               if left_by_plan else f"needs 2 or more hosts with Paddle, found {len(members)}")
        return replace(net, allreduce_skipped=why)
    ranks = sum(m.nproc for m in members)
    ar = opts.allreduce
    if backend == "nccl" and ar.sizes_mib == DEFAULT_SIZES_MIB:
        ar = replace(ar, sizes_mib=(*ar.sizes_mib, NCCL_LARGE_MIB))
    sizing = plan_sizes(ar.sizes_mib, ar.iters, ranks,
                        net.slowest_between([m.name for m in members]), ar.budget_s, ar.timeout)
    label = f"all-reduce ({backend}) over {len(members)} hosts"
    if on_step:
        on_step(f"{label}: hosts joined", 0, len(members))
    try:
        result = run_allreduce(members, backend, replace(
            ar, sizes_mib=sizing.sizes_mib, iters=sizing.iters, timeout=sizing.timeout_s,
            collective_s=sizing.collective_s, op_s=sizing.op_s,
            launch_idle_s=launch_idle_s(_import_s(answered, {m.name for m in members}),
                                        _crowding(answered, members))),
            on_progress=(lambda what, done, total: on_step(f"{label}: {what}", done, total))
            if on_step else None)
    except KeyboardInterrupt:
        return replace(net, interrupted=True)
    result = replace(result, budget_s=ar.budget_s, predicted_s=sizing.predicted_s,
                     iters=sizing.iters, dropped=sizing.dropped)
    return replace(net, allreduce=result, wall_s=net.wall_s + time.monotonic() - started)
