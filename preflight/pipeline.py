"""One check of a cluster, as check, baseline and audit run it: collect, measure, judge, plan,
and the report document. Takes typed options (the CLI builds them from its flags), so a run
can be driven by anything that can fill a CheckOptions."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from preflight import runlog
from preflight.checks import ALL_CHECKS, CheckSpec, allreduce
from preflight.collect import slurm
from preflight.collect.fanout import CollectOptions, collect, local_host
from preflight.collect.remote import Remote, SshRemote
from preflight.collect.ssh import close_gateways
from preflight.config.errors import UsageError
from preflight.inventory import load
from preflight.judge import judge, run_checks
from preflight.model.baseline import Audit
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Judgement
from preflight.model.host import Host, HostFailure, HostOutcome, Stage
from preflight.model.measure import NetworkTests
from preflight.model.plan import Plan
from preflight.model.policy import Policy
from preflight.network.orchestrate import (
    NetworkOptions,
    resolve_ip,
    run_allreduce_stage,
    run_link_tests,
)
from preflight.placement.planner import plan as make_plan
from preflight.report import jsonreport, terminal
from preflight.report.jsonreport import STDOUT


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
    python: str = "python3"  # the local audit's training interpreter
    collect: CollectOptions = CollectOptions()
    network: Optional[NetworkOptions] = NetworkOptions()  # None: no active tests
    fail_on: str = "fail"
    outputs: Mapping[str, Optional[str]] = field(default_factory=dict)  # flag -> file to write
    log: Optional[str] = None  # the results log; None: a new one in the default directory
    write_log: bool = True
    progress: bool = True  # the live count, when stderr is a terminal
    transport: str = "ssh"  # or "slurm": job steps through srun (collect/slurm.py)


@dataclass(frozen=True)
class CheckRun:
    cluster: Cluster
    findings: list[Finding]
    plan: Plan
    judgement: Judgement
    doc: dict[str, Any]
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


def is_local(opts: CheckOptions) -> bool:
    """Whether the run audits this machine alone (no inventory): no SSH, no peers, no plan."""
    return not opts.inventory and opts.inventory_format != "slurm"


def load_hosts(opts: CheckOptions) -> list[Host]:
    """The hosts of the run: the inventory's as SSH reaches them, or this machine."""
    if is_local(opts):
        return [local_host(python=opts.python)]
    hosts = load(opts.inventory, opts.inventory_format, opts.ssh_config, opts.limit)
    return cli_timeout_wins(hosts) if opts.connect_timeout_given else hosts


def cli_timeout_wins(hosts: Sequence[Host]) -> list[Host]:
    """The hosts with their config's ConnectTimeout dropped, their hops' too: a
    --connect-timeout given on the command line wins over the OpenSSH config."""
    return [replace(h, connect_timeout=None, jump=tuple(
        replace(j, connect_timeout=None) for j in h.jump)) for h in hosts]


def checks_to_run(skip: Sequence[str]) -> list[CheckSpec]:
    return [c for c in ALL_CHECKS if c.name not in skip]


def run(opts: CheckOptions, command: str, audit: Optional[Audit] = None,
        argv: Sequence[str] = ()) -> CheckRun:
    """Runs one check; returns everything it learned. Each host's answer and each
    measurement goes to the results log as it arrives."""
    hosts = load_hosts(opts)
    check_outputs(opts.outputs)
    # The active tests need peers: a local audit of one machine has none.
    active = opts.network is not None and len(hosts) > 1
    collect_opts = replace(opts.collect, files=opts.policy.files, keep_connections=active)
    progress = terminal.Progress(enabled=None if opts.progress else False)
    started = time.time()
    log = (runlog.open_for_run(opts.log, command, argv, hosts, started, _inventory_path(opts))
           if opts.write_log else None)
    connections: dict[str, Any] = {}
    network: Optional[NetworkTests] = None
    ips: dict[str, str] = {}  # resolved once, after collection: the plan is made twice

    def answered(outcome: HostOutcome, done: int, total: int) -> None:
        if log is not None:
            log.host(outcome)
        progress(outcome, done, total)

    job: Optional[slurm.Allocation] = None
    remotes: dict[str, Remote] = {}
    rechecked: dict[str, str] = {}
    try:
        if opts.transport == "slurm":
            outcomes, job, rechecked = _collect_slurm(hosts, collect_opts, answered,
                                                      connections)
            if job is not None:
                remotes = {o.host.name: slurm.SlurmRemote(o.host.name, job)
                           for o in outcomes if o.ok and o.host.name not in rechecked}
            # The nodes re-checked over SSH take part in the active tests over SSH.
            remotes.update({name: SshRemote(name, conn, collect_opts.connect_timeout)
                            for name, conn in connections.items()})
        else:
            outcomes = collect(hosts, collect_opts, on_result=answered, connections=connections)
            remotes = {name: SshRemote(name, conn, collect_opts.connect_timeout)
                       for name, conn in connections.items()}
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
                keep = left_out_so_far(opts.policy, audit, ips, outcomes, network, opts.skip)
                network = run_allreduce_stage(network, outcomes, remotes, opts.network, keep,
                                              on_step=progress.step)
            except KeyboardInterrupt:  # between the stages: what the links measured stays
                network = replace(network, interrupted=True)
            if log is not None:
                log.network(network)
    finally:
        progress.close()
        for conn in connections.values():
            conn.close()
        close_gateways()
        if job is not None:
            job.close()
    interrupted = collect_interrupted or bool(network and network.interrupted)
    return judged(opts, command, audit, hosts, outcomes, network, started,
                  round(time.time() - started, 3), interrupted, log, ips, rechecked)


def _collect_slurm(hosts: Sequence[Host], opts: CollectOptions,
                   answered: Callable[[HostOutcome, int, int], None],
                   connections: dict[str, Any],
                   ) -> tuple[list[HostOutcome], Optional[slurm.Allocation], dict[str, str]]:
    """The hosts' outcomes through Slurm, the job their steps ran in (the user's
    allocation, else one asked for the nodes that can run a step, given back by the caller),
    and {node: its drain reason} for the nodes re-checked over SSH.

    A node Slurm will not run a step on is a finding with Slurm's reason, except one that
    preflight drained: Slurm runs no step there, so the fix would never be seen and `resume`
    could never return it. Such a node is re-checked over SSH, as the operator who drains
    and resumes nodes reaches it (pam_slurm_adopt lets administrators in), and it stays
    drained throughout: no job can land on it before it has passed."""
    try:
        states = slurm.nodes([h.name for h in hosts])
    except slurm.SlurmError as e:
        raise UsageError(f"--transport slurm: {e}") from None
    # Peers reach a node at its NodeAddr (no SSH_CONNECTION tells it here).
    hosts = [replace(h, address=states[h.name].address) if h.name in states else h
             for h in hosts]
    recheck = {h.name: states[h.name].reason for h in hosts
               if h.name in states and states[h.name].drained_by_preflight}
    through_slurm = [h for h in hosts if h.name not in recheck]
    usable = [h.name for h in through_slurm if h.name in states and not states[h.name].usable]
    done: dict[str, HostOutcome] = {}
    job = slurm.Allocation.current()
    if job is None and usable:
        try:
            job = slurm.Allocation.request(usable, opts.connect_timeout)
        except slurm.SlurmError as e:
            done = {h.name: HostOutcome(h, failure=HostFailure(Stage.SLURM, str(e)))
                    for h in through_slurm}
    if through_slurm and not done:
        done = {o.host.name: o for o in slurm.collect(through_slurm, opts, job, states)}
    over_ssh = [h for h in hosts if h.name in recheck]
    for o in collect(over_ssh, opts, connections=connections) if over_ssh else ():
        done[o.host.name] = o if o.ok or o.failure is None else HostOutcome(
            o.host, failure=HostFailure(Stage.SLURM, (
                f"node drained ({recheck[o.host.name]}); its re-check over SSH failed "
                f"({o.failure.stage.value}): {o.failure.reason}")), elapsed_s=o.elapsed_s)
    outcomes = [done[h.name] for h in hosts]
    for i, o in enumerate(outcomes, 1):
        answered(o, i, len(outcomes))
    return outcomes, job, recheck


def left_out_so_far(policy: Policy, audit: Optional[Audit], ips: Mapping[str, str],
                    outcomes: Sequence[HostOutcome], network: NetworkTests,
                    skip: Sequence[str] = ()) -> dict[str, str]:
    """Returns {host: why} for the hosts the plan leaves out on what is known before the
    all-reduce (facts, iperf3): its first reason each."""
    cluster = Cluster(tuple(outcomes), policy, network, audit)
    findings = run_checks(cluster, [c for c in checks_to_run(skip)
                                    if c.name != allreduce.NAME])
    plan = make_plan(cluster, findings, ips)
    return {h: reasons[0] for h, reasons in plan.excluded.items()}


def _ips(outcomes: Sequence[HostOutcome]) -> dict[str, str]:
    """Each host's IP: where SSH reached it, else its address resolved here."""
    return {o.host.name: ip for o in outcomes
            if (ip := o.ip or resolve_ip(o.host.address)) is not None}


def judged(opts: CheckOptions, command: str, audit: Optional[Audit], hosts: Sequence[Host],
           outcomes: Sequence[HostOutcome], network: Optional[NetworkTests], started: float,
           duration: Optional[float], interrupted: bool,
           log: Optional[runlog.RunLog] = None,
           ips: Optional[Mapping[str, str]] = None,
           rechecked: Optional[Mapping[str, str]] = None) -> CheckRun:
    """Checks, plan, verdict and report document of what a run learned (live or logged);
    ips: the hosts' addresses as the run resolved them (resolved here when not given);
    rechecked: the Slurm nodes preflight had drained, re-checked over SSH, and why drained."""
    cluster = Cluster(tuple(outcomes), opts.policy, network, audit)
    findings = run_checks(cluster, checks_to_run(opts.skip))
    plan = make_plan(cluster, findings, _ips(outcomes) if ips is None else ips)
    # A machine audited alone is no cluster: its plan (one host, "0 fit" when it fails)
    # only repeats the findings. It is made still, for --emit-launch.
    local = is_local(opts)
    judgement = judge(cluster, findings, None if local else plan, opts.fail_on,
                      waived=opts.skip)
    meta: dict[str, Any] = {
        "command": command, "local": local, "started_at": started, "duration_s": duration,
        "inventory": _inventory_path(opts), "inventory_format": opts.inventory_format,
        "ssh_config": opts.ssh_config, "limit": opts.limit, "interrupted": interrupted,
        "fail_on": opts.fail_on}
    if rechecked:
        meta["rechecked_over_ssh"] = dict(rechecked)
    if audit is not None:
        b = audit.baseline
        meta["audit"] = {"baseline": os.path.abspath(b.path), "taken_at": b.taken_at,
                         "taken_on": b.taken_on, "tolerance": audit.tolerance,
                         "max_age_s": audit.max_age_s}
    doc = jsonreport.document(cluster, judgement, meta, None if local else plan)
    return CheckRun(cluster, findings, plan, judgement, doc, interrupted, log)


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
    return judged(opts, logged.command, audit, logged.hosts, outcomes, network,
                  logged.started_at, duration, interrupted)
