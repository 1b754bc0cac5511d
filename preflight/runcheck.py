"""One check of a cluster, as check, baseline and audit run it: collect, measure, judge, plan,
and the report document; then the report files the operator asked for."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from preflight import runlog
from preflight.allreduce import AllReduceOptions
from preflight.baseline import Audit
from preflight.collect import CollectOptions, collect, local_host
from preflight.engine import judge, run_checks
from preflight.inventory import load
from preflight.iperfrun import IperfOptions
from preflight.measure import NetworkTests
from preflight.model import Cluster, Finding, Host, HostFailure, HostOutcome, Judgement, Stage
from preflight.netbench import NetworkOptions, resolve_ip, run_network_tests
from preflight.plan import Plan
from preflight.planner import plan as make_plan
from preflight.policy import Policy
from preflight.policy import build as build_policy
from preflight.remote import SshRemote
from preflight.report import html, jsonreport, junit, markdown, terminal

# --flag -> what it writes; every one of them is checked before the run starts.
OUTPUTS = ("json", "junit", "markdown", "html", "emit_launch")


class UsageError(Exception):
    """An operator error: printed as one line, exit code 2."""


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


def check_outputs(args: argparse.Namespace) -> None:
    """Refuses, before anything runs, an output file whose directory does not exist."""
    for dest in OUTPUTS:
        path = getattr(args, dest, None)
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            flag = "--" + dest.replace("_", "-")
            raise UsageError(f"{flag} {path}: directory {parent} does not exist")


def policy_of(args: argparse.Namespace) -> Policy:
    return build_policy(args.policy, args.mode, args.require, args.files, args.ports,
                        {"nproc_per_node": args.nproc_per_node, "nnodes": args.nnodes,
                         "server_num": args.server_num, "trainer_num": args.trainer_num})


def open_log(args: argparse.Namespace, command: str, argv: Sequence[str],
             hosts: Sequence[Host], started: float) -> Optional[runlog.RunLog]:
    """Starts this run's results log (--log FILE, else one in the default directory), after
    saying which earlier runs were killed before they finished."""
    if getattr(args, "no_log", False):
        return None
    path = getattr(args, "log", None)
    directory = os.path.dirname(os.path.abspath(path)) if path else runlog.default_dir()
    try:
        for killed in runlog.killed_runs(directory, only=path):
            where = runlog.mark_killed(killed.path, move_aside=bool(path))
            answered = sum(1 for o in killed.outcomes.values() if o.ok)
            print(f"preflight: an earlier run was stopped before it finished ("
                  f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(killed.started_at))}, "
                  f"{killed.command}, {answered} of {len(killed.hosts)} hosts answered); "
                  f"what it learned: preflight report {where}", file=sys.stderr)
        if path and os.path.exists(path):
            os.unlink(path)  # a finished run's log, as --json replaces its report
        log = runlog.RunLog(path or runlog.new_path(directory, started))
        if not path:
            runlog.prune(directory)
    except OSError as e:
        # Where the log cannot go, the run still runs: it only loses its insurance.
        print(f"preflight: warning: no results log ({e.strerror or e}: "
              f"{getattr(e, 'filename', None) or directory})", file=sys.stderr)
        return None
    log.start(command, argv, hosts, started,
              os.path.abspath(args.inventory) if args.inventory else None)
    return log


def run(args: argparse.Namespace, command: str, audit: Optional[Audit] = None,
        argv: Sequence[str] = ()) -> CheckRun:
    """Runs one check with the options of args; returns everything it learned. Each host's
    answer and each measurement goes to the results log as it arrives."""
    policy = policy_of(args)
    hosts = load(args.inventory) if args.inventory else [local_host(python=args.python)]
    check_outputs(args)
    # The active tests need peers: a local audit of one machine has none.
    active = not args.no_network_tests and len(hosts) > 1
    opts = CollectOptions(forks=args.forks, connect_timeout=args.connect_timeout,
                          deadline=args.deadline,
                          accept_new_host_keys=args.accept_new_host_keys,
                          cpu_sample_s=args.cpu_sample, files=policy.files,
                          paddle=not args.no_paddle,
                          keep_connections=active)
    progress = terminal.Progress(enabled=False if args.no_progress else None)
    started = time.time()
    log = open_log(args, command, argv, hosts, started)
    connections: dict[str, Any] = {}
    network: Optional[NetworkTests] = None

    def answered(outcome: HostOutcome, done: int, total: int) -> None:
        if log is not None:
            log.host(outcome)
        progress(outcome, done, total)

    try:
        outcomes = collect(hosts, opts, on_result=answered, connections=connections)
        collect_interrupted = any(o.failure and o.failure.stage is Stage.INTERRUPTED
                                  for o in outcomes)
        if active and not collect_interrupted:
            remotes = {name: SshRemote(name, conn, args.connect_timeout)
                       for name, conn in connections.items()}
            network = run_network_tests(outcomes, remotes, policy.limits, NetworkOptions(
                matrix=args.network_matrix,
                iperf=IperfOptions(port=args.iperf_port, seconds=args.iperf_seconds),
                allreduce=AllReduceOptions(port=args.allreduce_port,
                                           sizes_mib=args.allreduce_sizes,
                                           timeout=args.allreduce_timeout),
                run_allreduce=not args.no_allreduce), on_step=progress.step,
                on_link=log.link if log is not None else None)
            if log is not None:
                log.network(network)
    finally:
        progress.close()
        for conn in connections.values():
            conn.close()
    interrupted = collect_interrupted or bool(network and network.interrupted)
    return judged(args, command, audit, policy, hosts, outcomes, network, started,
                  round(time.time() - started, 3), interrupted, log)


def judged(args: argparse.Namespace, command: str, audit: Optional[Audit], policy: Policy,
           hosts: Sequence[Host], outcomes: Sequence[HostOutcome],
           network: Optional[NetworkTests], started: float, duration: Optional[float],
           interrupted: bool, log: Optional[runlog.RunLog] = None) -> CheckRun:
    """Checks, plan, verdict and report document of what a run learned (live or logged)."""
    cluster = Cluster(tuple(outcomes), policy, network, audit)
    findings = run_checks(cluster)
    ips = {h.name: ip for h in hosts if (ip := resolve_ip(h.address)) is not None}
    plan = make_plan(cluster, findings, ips)
    fail_on = getattr(args, "fail_on", "fail")
    judgement = judge(cluster, findings, plan, fail_on)
    meta: dict[str, Any] = {
        "command": command, "started_at": started, "duration_s": duration,
        "inventory": os.path.abspath(args.inventory) if args.inventory else None,
        "interrupted": interrupted, "fail_on": fail_on}
    if audit is not None:
        b = audit.baseline
        meta["audit"] = {"baseline": os.path.abspath(b.path), "taken_at": b.taken_at,
                         "taken_on": b.taken_on, "tolerance": audit.tolerance,
                         "max_age_s": audit.max_age_s}
    doc = jsonreport.document(cluster, judgement, meta, plan)
    return CheckRun(cluster, findings, plan, judgement, doc, interrupted, log)


def from_log(args: argparse.Namespace, logged: runlog.LoggedRun,
             audit: Optional[Audit] = None) -> CheckRun:
    """Judges what a results log holds, with the options of the run that wrote it (args);
    the hosts it has no answer for could not be checked: the run stopped first."""
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
    return judged(args, logged.command, audit, policy_of(args), logged.hosts, outcomes,
                  network, logged.started_at, duration, interrupted)


def write_reports(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Writes the report files asked for (each atomically) and the GitHub step summary."""
    fail_on = doc.get("fail_on") or "fail"
    if getattr(args, "json", None):
        jsonreport.write_atomic(args.json, doc)
    for dest, render in (("junit", lambda d: junit.render(d, fail_on)),
                         ("markdown", markdown.render), ("html", html.render)):
        path = getattr(args, dest, None)
        if path:
            jsonreport.write_text_atomic(path, render(doc))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and not getattr(args, "no_step_summary", False):
        # GitHub Actions shows this file on the run's page; appending is its protocol.
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(markdown.render(doc))
        except OSError as e:
            print(f"preflight: warning: GITHUB_STEP_SUMMARY {summary}: {e.strerror}",
                  file=sys.stderr)
