"""One check of a cluster, as check, baseline and audit run it: collect, measure, judge, plan,
and the report. Takes typed options (the CLI builds them from its flags), so a run
can be driven by anything that can fill a CheckOptions."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

from preflight.checks import ALL_CHECKS, CheckSpec, allreduce, ps_fanin, ps_round
from preflight.collect.fanout import PROBE
from preflight.common.hostjob import CollectOptions
from preflight.config.errors import UsageError
from preflight.history import runlog
from preflight.inventory.query import HostQuery, hosts_of, lists_hosts
from preflight.judge import judge, run_checks
from preflight.model.baseline import Audit
from preflight.model.cluster import Cluster
from preflight.model.container import ContainerLayer
from preflight.model.findings import FailOn, Finding, Judgement
from preflight.model.host import HostFailure, HostOutcome, Stage, Via
from preflight.model.learned import Learned
from preflight.model.measure import NetworkTests
from preflight.model.plan import Plan
from preflight.model.policy import Policy
from preflight.model.report import AuditEntry, Report
from preflight.network.orchestrate import (
    NetworkOptions,
    resolve_ip,
    run_allreduce_stage,
    run_link_tests,
)
from preflight.network.plan_stages import run_fanin_stage, run_ps_stage, run_reach_stage
from preflight.placement.planner import plan as make_plan
from preflight.report import build, terminal
from preflight.report.jsonreport import STDOUT
from preflight.transport import table
from preflight.transport.base import Transport


@dataclass(frozen=True)
class CheckOptions:
    """Everything one check run is told."""

    policy: Policy = field(default_factory=Policy)
    inventory: Optional[str] = None  # None: this machine, audited locally without SSH
    inventory_format: str = "auto"  # how -i is read (inventory.FORMATS)
    ssh_config: Optional[str] = None  # -F: the OpenSSH config (None: the usual ones)
    limit: Optional[str] = None  # --limit PATTERN
    skip: tuple[str, ...] = ()  # checks waived (--skip): not run, and named in every report
    connect_timeout_given: bool = False  # --connect-timeout beats the config's ConnectTimeout
    # --python: the training interpreter of the hosts whose inventory names none, and of
    # this machine audited alone (None: python3)
    python: Optional[str] = None
    collect: CollectOptions = CollectOptions()
    network: Optional[NetworkOptions] = NetworkOptions()  # None: no active tests
    fail_on: FailOn = "fail"
    outputs: Mapping[str, Optional[str]] = field(default_factory=dict)  # flag -> file to write
    log: Optional[str] = None  # the results log; None: a new one in the default directory
    write_log: bool = True
    progress: bool = True  # the live count, when stderr is a terminal
    transport: Via = Via.SSH  # as named (--transport); transport.table.pick decides
    # The job's container as the command line gives it: above the inventory's and the
    # policy's (config/container.py).
    container: Optional[ContainerLayer] = None


@dataclass(frozen=True)
class CheckRun:
    cluster: Cluster
    findings: list[Finding]
    plan: Plan
    judgement: Judgement
    report: Report  # what the renderers, the JSON report and the actions take
    interrupted: bool
    log: Optional[runlog.RunLog] = None

    def close_log(self, exit_code: int) -> None:
        """Writes the log's end record: a log without one is a run that was killed."""
        if self.log is not None:
            self.log.end(self.judgement.verdict.value, exit_code)
            self.log.close()


def check_outputs(outputs: Mapping[str, Optional[str]]) -> None:
    """Refuses, before anything runs, an output that could not be written at the end: a
    missing or unwritable directory, a directory where a file goes (a file where
    --emit-launch's directory goes), '-' (standard output) for two reports at once."""
    to_stdout = [flag for flag, path in outputs.items() if path == STDOUT]
    if len(to_stdout) > 1:
        raise UsageError(f"{' and '.join(to_stdout)}: only one report can go to standard "
                         "output ('-')")
    for flag, path in outputs.items():
        if not path or path == STDOUT:
            continue
        if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
            continue  # a pipe or a device (/dev/stdout): written as it is
        is_dir = flag == "--emit-launch"
        real = os.path.realpath(path)
        if is_dir and os.path.exists(real) and not os.path.isdir(real):
            raise UsageError(f"{flag} {path}: not a directory")
        if not is_dir and os.path.isdir(real):
            raise UsageError(f"{flag} {path}: is a directory (give a file name)")
        parent = os.path.dirname(real)
        if not os.path.isdir(parent):
            raise UsageError(f"{flag} {path}: directory {parent} does not exist")
        writable = real if is_dir and os.path.isdir(real) else parent
        if not os.access(writable, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {path}: directory {writable} is not writable")


def _inventory_path(opts: CheckOptions) -> Optional[str]:
    """The inventory as a report records it: a file's absolute path, else as given."""
    if opts.inventory and os.path.isfile(opts.inventory):
        return os.path.abspath(opts.inventory)
    return opts.inventory


def transport_of(opts: CheckOptions) -> type[Transport]:
    """The transport the run's options choose (the table decides)."""
    return table.pick(opts.transport, lists_hosts(opts.inventory, opts.inventory_format))


def is_local(opts: CheckOptions) -> bool:
    """Whether the run audits this machine alone (no inventory): no SSH, no peers, no plan."""
    return transport_of(opts).alone


def host_query(opts: CheckOptions) -> HostQuery:
    return HostQuery(opts.inventory, opts.inventory_format, opts.ssh_config, opts.limit,
                     opts.python, opts.connect_timeout_given,
                     (opts.policy.container, opts.container))


def checks_to_run(skip: Sequence[str]) -> list[CheckSpec]:
    return [c for c in ALL_CHECKS if c.name not in skip]


def run(opts: CheckOptions, command: str, audit: Optional[Audit] = None,
        argv: Sequence[str] = ()) -> CheckRun:
    """Runs one check; returns everything it learned. Each host's answer and each
    measurement goes to the results log as it arrives."""
    transport = transport_of(opts)()
    hosts = hosts_of(host_query(opts), transport.via, transport.alone)
    check_outputs(opts.outputs)
    # The active tests need peers: a local audit of one machine has none.
    active = opts.network is not None and len(hosts) > 1
    collect_opts = replace(opts.collect, files=opts.policy.files, keep_connections=active)
    progress = terminal.Progress(enabled=None if opts.progress else False)
    started = time.time()
    log = (runlog.open_for_run(opts.log, command, argv, hosts, started, _inventory_path(opts))
           if opts.write_log else None)
    network: Optional[NetworkTests] = None
    ips: dict[str, str] = {}  # resolved once, after collection: the plan is made twice

    def answered(outcome: HostOutcome, done: int, total: int) -> None:
        if log is not None:
            log.host(outcome)
        progress(outcome, done, total)

    try:
        outcomes = transport.collect(hosts, collect_opts, PROBE, answered)
        remotes = transport.remotes()
        collect_interrupted = any(o.failure and o.failure.stage is Stage.INTERRUPTED
                                  for o in outcomes)
        ips = _ips(outcomes)
        if active and opts.network is not None and not collect_interrupted:
            network = run_link_tests(outcomes, remotes, opts.policy.limits, opts.network,
                                     on_step=progress.step,
                                     on_link=log.link if log is not None else None)
            # The all-reduce certifies the hosts the job would use: what the checks so far
            # leave out (a confirmed slow link, another stack) is not a rank.
            try:
                so_far = plan_so_far(opts.policy, audit, ips, outcomes, network, opts.skip)
                # A port another host of the job cannot reach hangs the job's first
                # connection: its host leaves the plan the rest is measured on.
                network = run_reach_stage(network, so_far, outcomes, remotes,
                                          on_step=progress.step)
                if any(r.unreached for r in network.reach):
                    so_far = plan_so_far(opts.policy, audit, ips, outcomes, network,
                                         opts.skip)
                keep = {h: reasons[0] for h, reasons in so_far.excluded.items()}
                # A PS job's pushes converge on its servers: measured on the plan's own.
                network = run_fanin_stage(network, so_far, remotes, opts.network,
                                          opts.policy.limits, on_step=progress.step)
                network = run_ps_stage(network, so_far, outcomes, remotes, opts.network,
                                       on_step=progress.step)
                network = run_allreduce_stage(network, outcomes, remotes, opts.network, keep,
                                              on_step=progress.step)
            except KeyboardInterrupt:  # between the stages: what the links measured stays
                network = replace(network, interrupted=True)
            if log is not None:
                log.network(network)
    finally:
        progress.close()
        transport.close()
    interrupted = collect_interrupted or bool(network and network.interrupted)
    return judged(opts, Learned(command, tuple(outcomes), network, started,
                                round(time.time() - started, 3), interrupted, audit, ips,
                                transport.notes(), tuple(argv), os.getcwd()), log)


def left_out_so_far(policy: Policy, audit: Optional[Audit], ips: Mapping[str, str],
                    outcomes: Sequence[HostOutcome], network: NetworkTests,
                    skip: Sequence[str] = ()) -> dict[str, str]:
    """Returns {host: why} for the hosts the plan leaves out on what is known before the
    all-reduce (facts, iperf3): its first reason each."""
    plan = plan_so_far(policy, audit, ips, outcomes, network, skip)
    return {h: reasons[0] for h, reasons in plan.excluded.items()}


def plan_so_far(policy: Policy, audit: Optional[Audit], ips: Mapping[str, str],
                outcomes: Sequence[HostOutcome], network: NetworkTests,
                skip: Sequence[str] = ()) -> Plan:
    """The plan on what is known before the all-reduce (facts, iperf3): the hosts the job
    would use, which the rest of the active tests measure."""
    cluster = Cluster(tuple(outcomes), policy, network, audit)
    findings = run_checks(cluster, [c for c in checks_to_run(skip)
                                    if c.name not in (allreduce.NAME, ps_fanin.NAME,
                                                      ps_round.NAME)])
    return make_plan(cluster, findings, ips)


def _ips(outcomes: Sequence[HostOutcome]) -> dict[str, str]:
    """Each host's IP: where SSH reached it, else its address resolved here."""
    return {o.host.name: ip for o in outcomes
            if (ip := o.ip or resolve_ip(o.host.address)) is not None}


def judged(opts: CheckOptions, learned: Learned,
           log: Optional[runlog.RunLog] = None) -> CheckRun:
    """Checks, plan, verdict and report of what a run learned (live or logged)."""
    cluster = Cluster(tuple(learned.outcomes), opts.policy, learned.network, learned.audit)
    findings = run_checks(cluster, checks_to_run(opts.skip))
    ips = _ips(learned.outcomes) if learned.ips is None else learned.ips
    plan = make_plan(cluster, findings, ips)
    # A machine audited alone is no cluster: its plan (one host, "0 fit" when it fails)
    # only repeats the findings. It is made still, for --emit-launch.
    local = is_local(opts)
    judgement = judge(cluster, findings, None if local else plan, opts.fail_on,
                      waived=opts.skip)
    audit = learned.audit
    report = replace(
        build.report(cluster, judgement, None if local else plan),
        command=learned.command, argv=learned.argv, cwd=learned.cwd,
        local=local, started_at=learned.started_at,
        duration_s=learned.duration_s, inventory=_inventory_path(opts),
        inventory_format=opts.inventory_format, ssh_config=opts.ssh_config,
        limit=opts.limit, interrupted=learned.interrupted, fail_on=opts.fail_on,
        rechecked_over_ssh=dict(learned.notes.rechecked_over_ssh),
        audit=None if audit is None else AuditEntry(
            os.path.abspath(audit.baseline.path), audit.baseline.taken_at,
            audit.baseline.taken_on, audit.tolerance, audit.max_age_s))
    return CheckRun(cluster, findings, plan, judgement, report, learned.interrupted, log)


def from_log(opts: CheckOptions, logged: runlog.LoggedRun,
             audit: Optional[Audit] = None) -> CheckRun:
    """Judges what a results log holds, with the options of the run that wrote it; the hosts
    it has no answer for could not be checked: the run stopped first."""
    outcomes = [logged.outcomes.get(h.name) or HostOutcome(h, failure=HostFailure(
        Stage.INTERRUPTED, "preflight stopped before this host answered (results log "
        f"{logged.path})")) for h in logged.hosts]
    network = logged.network_tests()
    stopped = not logged.finished or bool(logged.end and logged.end.get("killed"))
    interrupted = stopped or bool(network and network.interrupted) or any(
        o.failure is not None and o.failure.stage is Stage.INTERRUPTED for o in outcomes)
    duration = None
    if logged.end and isinstance(logged.end.get("at"), (int, float)) and not stopped:
        duration = round(float(logged.end["at"]) - logged.started_at, 3)
    return judged(opts, Learned(logged.command, tuple(outcomes), network, logged.started_at,
                                duration, interrupted, audit, argv=tuple(logged.argv),
                                cwd=logged.cwd))
