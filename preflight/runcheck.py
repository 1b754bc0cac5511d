"""One check of a cluster, as check, baseline and audit run it: collect, measure, judge, plan,
and the report document; then the report files the operator asked for."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

from preflight.allreduce import AllReduceOptions
from preflight.baseline import Audit
from preflight.collect import CollectOptions, collect, local_host
from preflight.engine import judge, run_checks
from preflight.inventory import load
from preflight.iperfrun import IperfOptions
from preflight.measure import NetworkTests
from preflight.model import Cluster, Finding, Judgement, Stage
from preflight.netbench import NetworkOptions, resolve_ip, run_network_tests
from preflight.plan import Plan
from preflight.planner import plan as make_plan
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


def check_outputs(args: argparse.Namespace) -> None:
    """Refuses, before anything runs, an output file whose directory does not exist."""
    for dest in OUTPUTS:
        path = getattr(args, dest, None)
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            flag = "--" + dest.replace("_", "-")
            raise UsageError(f"{flag} {path}: directory {parent} does not exist")


def run(args: argparse.Namespace, command: str, audit: Optional[Audit] = None) -> CheckRun:
    """Runs one check with the options of args; returns everything it learned."""
    policy = build_policy(args.policy, args.mode, args.require, args.files, args.ports,
                          {"nproc_per_node": args.nproc_per_node, "nnodes": args.nnodes,
                           "server_num": args.server_num, "trainer_num": args.trainer_num})
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
    connections: dict[str, Any] = {}
    network: Optional[NetworkTests] = None
    try:
        outcomes = collect(hosts, opts, on_result=progress, connections=connections)
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
                run_allreduce=not args.no_allreduce), on_step=progress.step)
    finally:
        progress.close()
        for conn in connections.values():
            conn.close()
    cluster = Cluster(tuple(outcomes), policy, network, audit)
    findings = run_checks(cluster)
    ips = {h.name: ip for h in hosts if (ip := resolve_ip(h.address)) is not None}
    plan = make_plan(cluster, findings, ips)
    fail_on = getattr(args, "fail_on", "fail")
    judgement = judge(cluster, findings, plan, fail_on)
    interrupted = collect_interrupted or bool(network and network.interrupted)
    meta: dict[str, Any] = {
        "command": command, "started_at": started,
        "duration_s": round(time.time() - started, 3),
        "inventory": os.path.abspath(args.inventory) if args.inventory else None,
        "interrupted": interrupted, "fail_on": fail_on}
    if audit is not None:
        b = audit.baseline
        meta["audit"] = {"baseline": os.path.abspath(b.path), "taken_at": b.taken_at,
                         "taken_on": b.taken_on, "tolerance": audit.tolerance,
                         "max_age_s": audit.max_age_s}
    doc = jsonreport.document(cluster, judgement, meta, plan)
    return CheckRun(cluster, findings, plan, judgement, doc, interrupted)


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
