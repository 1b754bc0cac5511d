"""One `preflight watch` run, as pipeline.py is one check's: a WatchRequest in (what the
command line asked, typed), the job found on its hosts (a plan's launch, or every Paddle job),
watched until the time is up, or until --act launched it again elsewhere, then followed there;
the last WatchResult out, every judgement and act in the results log on the way."""

from __future__ import annotations

import io
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional, TextIO, cast

from preflight.act import launches
from preflight.act.launch import load_plan
from preflight.act.recover import Acted, ActOptions, Actor
from preflight.common.units import hostlist
from preflight.common.visible import visible
from preflight.config.errors import UsageError
from preflight.inventory.query import HostQuery, hosts_of, lists_hosts
from preflight.model.host import Via
from preflight.model.report import Report
from preflight.model.watch import LaunchFailure, SchedulerEnd, WatchPolicy
from preflight.report import jsonreport, terminal
from preflight.transport import table
from preflight.transport.slurm import drain
from preflight.watch import record
from preflight.watch.judge import AtCheck
from preflight.watch.metrics import MetricsError
from preflight.watch.run import WatchOptions, WatchResult
from preflight.watch.run import watch as watch_job
from preflight.watch.sampler_text import DEFAULT_STEP_PATTERN, SamplerOptions


@dataclass
class WatchRequest:
    """What `preflight watch` was asked to do."""

    argv: list[str]  # the command line, kept in the results log
    transport: str
    inventory: Optional[str]
    inventory_format: str
    ssh_config: Optional[str]
    connect_timeout: float
    cli_timeout: bool  # --connect-timeout was given (it overrides the inventory's)
    accept_new_host_keys: bool
    policy: WatchPolicy
    step_pattern: Optional[str] = None  # None: the default step lines
    plan: Optional[str] = None  # --plan REPORT: its hosts, its launch
    marker: str = ""  # --marker: the launch to follow ("" : the plan's newest, or every job)
    jobid: Optional[str] = None  # --jobid: the Slurm job it runs in
    any_job: bool = False
    duration_s: Optional[float] = None  # --for; None: until interrupted
    once: bool = False
    metrics_port: Optional[int] = None
    metrics_address: str = "127.0.0.1"
    metrics_textfile: Optional[str] = None
    act: Optional[ActOptions] = None  # --act: the launch to act on
    log: Optional[str] = None  # --log; None: a new file of its own
    log_max_bytes: int = record.SAMPLES_MAX_BYTES  # --log-max-mb; 0: no bound


def run(req: WatchRequest, err: TextIO = sys.stderr) -> WatchResult:
    """Watches the job until the time is up (one judgement with --once); with --act, follows
    the job wherever it is launched again. A bad request is a UsageError."""
    started = time.time()
    path = req.log or record.default_path(started)
    try:
        log = record.Record(path, req.log_max_bytes)
    except OSError as e:
        raise UsageError(f"watch: --log {path}: {e.strerror or e}") from None
    plan, token, jobid = req.plan, req.marker, req.jobid
    if plan and not token and not req.any_job:
        # The newest launch of the plan whose job runs, else the newest at all (a job gone:
        # the watch says it waits for one). --act's own (commands) waits for a running one.
        launched = launches.running(plan) or launches.newest(plan)
        token = launched.token if launched else ""
        jobid = jobid or (launched.jobid if launched else None)
    end = None if not req.duration_s or req.once else time.monotonic() + req.duration_s
    acted = Acted()  # the cap and the cooldown hold over the relaunched job too
    actor_opts = req.act
    try:
        while True:
            left = None if end is None else end - time.monotonic()
            result = _watch_once(req, plan, token, jobid, log, actor_opts, acted, left, err)
            if result.relaunched is None or req.once or (left is not None and left <= 0):
                break
            # The job runs again on the hosts of a new plan (in a new Slurm job, where it
            # ran in one): follow it there.
            assert actor_opts is not None
            plan, launched = cast(tuple[str, launches.Launched], result.relaunched)
            actor_opts.plan, actor_opts.launched, token = plan, launched, launched.token
            jobid = launched.jobid
    finally:
        log.close()
    return result


def _watch_once(req: WatchRequest, plan: Optional[str], token: str, jobid: Optional[str],
                log: record.Record, actor_opts: Optional[ActOptions], acted: Acted,
                left: Optional[float], err: TextIO) -> WatchResult:
    """Watches one job (the plan's launch of token, or every job) until the time is up, or
    until --act launched it again elsewhere (the result says where)."""
    via = Via(req.transport)
    inventory, fmt, ssh_config = req.inventory, req.inventory_format, req.ssh_config
    names: Optional[list[str]] = None
    at_check: dict[str, AtCheck] = {}
    addresses: dict[str, str] = {}  # the job's address of each host (the plan's)
    if plan:
        nodes, source = load_plan(plan, ignore_verdict=True)
        names = [n.host for n in nodes]
        addresses = {n.address: n.host for n in nodes if n.address}
        at_check = at_check_of(jsonreport.read(plan))
        if not inventory:
            inventory, ssh_config = source.inventory, ssh_config or source.ssh_config
            fmt = source.fmt if fmt == "auto" else fmt
    fmt = table.inventory_format(via, inventory, fmt)
    transport = table.new(via, lists_hosts(inventory, fmt))
    if jobid:
        transport.follow(jobid)
    try:
        hosts = hosts_of(HostQuery(inventory, fmt, ssh_config, cli_timeout=req.cli_timeout),
                         transport.via, transport.alone)
        if names is not None:
            known = {h.name for h in hosts}
            missing = [n for n in names if n not in known]
            if missing:
                raise UsageError(f"watch: --plan {plan}: host {missing[0]} is not in "
                                 f"{inventory}")
            hosts = [h for h in hosts if h.name in names]
        unreached = transport.reach(hosts, req.connect_timeout, req.accept_new_host_keys)
        remotes = transport.remotes()
        actor = None
        if actor_opts is not None:
            def say(step: str, text: str, fields: Any) -> None:
                print(f"act: {step}: {visible(text)}", file=err, flush=True)
                log.event("act", step=step, text=text, **fields)
            actor = Actor(actor_opts, remotes, say, drain.drain_now, acted)

        def launch_failure() -> Optional[LaunchFailure]:
            if not token or (actor is not None and actor.stopped):
                return None  # no launch to ask, or the watch stopped the job itself
            launched = launches.by_token(token)
            return launched.failed if launched else None

        def scheduler_end() -> Optional[SchedulerEnd]:
            # The scheduler's job the samplers run in (--jobid, the launch's, or the
            # allocation the watch runs inside): its end is the watch's.
            if actor is not None and actor.stopped:
                return None  # the watch stopped it itself (--act)
            return transport.job_end()

        policy = req.policy
        opts = WatchOptions(policy, SamplerOptions(
            policy.interval_s, token=token, step_pattern=req.step_pattern or DEFAULT_STEP_PATTERN),
            left, req.once, at_check, req.metrics_port, req.metrics_address,
            req.metrics_textfile, {**{h.address: h.name for h in hosts}, **addresses}, actor,
            launch_failure, scheduler_end)
        print(f"watching {'the job of marker ' + token if token else 'every Paddle job'} on "
              f"{hostlist([h.name for h in hosts])} every {policy.interval_s:g} s"
              + (f" for {left:.0f} s" if left and not req.once else "")
              + (f"; one judgement in {opts.length() or 0:.0f} s, once the "
                 f"{policy.persist_s:g} s window is covered, whether a job runs there yet or "
                 "not" if req.once else "")
              + ("; acting on what holds it" if actor else "") + f"; log: {log.path}",
              file=err)
        # What the judgement reads besides the samples, so that the log can be judged again.
        log.event("start", argv=req.argv, hosts=[h.name for h in hosts], marker=token,
                  plan=plan, policy=vars(policy),
                  at_check={h: vars(a) for h, a in sorted(at_check.items())},
                  addresses=dict(sorted(opts.addresses.items())))
        shown = io.StringIO() if req.once else sys.stdout
        try:
            result = watch_job(remotes, {h.name: h.probe_python for h in hosts},
                               opts, log, shown, terminal.width_of(sys.stdout), unreached)
        except MetricsError as e:
            raise UsageError(f"watch: {e}") from None
        log.findings("last", result.findings)
        log.event("end", code=result.code, interrupted=result.interrupted,
                  cpu_s=round(result.cpu_s, 3), samples=result.samples,
                  relaunched=result.relaunched is not None)
    finally:
        transport.close()
    return result


def at_check_of(report: Report) -> dict[str, AtCheck]:
    """What the report measured of each host: the cores the job had at the check, the
    median of its iperf3 links."""
    links: dict[str, list[float]] = {}
    for link in report.network.links if report.network else ():
        for end in (link.sender, link.receiver):
            if link.received_bps:
                links.setdefault(end, []).append(link.received_bps)
    out = {}
    for name, entry in report.hosts.items():
        cpu = entry.facts.job_cpu() if entry.facts is not None else None
        bps = sorted(links.get(name, ()))
        out[name] = AtCheck(cores=getattr(cpu, "effective", None),
                            link_bps=bps[len(bps) // 2] if bps else None)
    return out
