"""The subcommands: each turns its flags into typed options, runs, prints, and returns its exit
code. With watchcmd (the watch's), the only modules that read argparse's Namespace."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import replace
from typing import Any, Optional, TextIO

from preflight import judge, launching, pipeline
from preflight.act.launch import LaunchOptions, load_plan
from preflight.cli.args import DEFAULT_CONNECT_TIMEOUT, build_parser
from preflight.cli.watchcmd import cmd_watch, watch_report
from preflight.common import profile
from preflight.common.hostjob import CollectOptions
from preflight.common.secrets import scrub
from preflight.common.units import rate
from preflight.common.visible import visible
from preflight.config import container
from preflight.config.document import Fields
from preflight.config.errors import InputError, UsageError
from preflight.config.policy import build as build_policy
from preflight.history import baseline, diff, runlog
from preflight.inventory.query import HostQuery, lists_hosts
from preflight.model.baseline import Audit
from preflight.model.findings import Verdict
from preflight.model.host import Via
from preflight.model.report import Report
from preflight.network.allreduce_cmd import AllReduceOptions
from preflight.network.iperf import IperfOptions
from preflight.network.orchestrate import NetworkOptions
from preflight.network.ps_round import PsRoundOptions
from preflight.pipeline import CheckOptions, CheckRun
from preflight.placement.launcher import emit_files
from preflight.report import files, jsonreport, terminal
from preflight.report.jsonreport import STDOUT
from preflight.transport import table
from preflight.transport.slurm import drain, health
from preflight.transport.slurm import steps as slurm
from preflight.watch import replay

EXIT_GO, EXIT_NO_GO, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def report_files(args: argparse.Namespace) -> files.ReportFiles:
    return files.ReportFiles(json=getattr(args, "json", None),
                             junit=getattr(args, "junit", None),
                             markdown=getattr(args, "markdown", None),
                             html=getattr(args, "html", None),
                             step_summary=not getattr(args, "no_step_summary", False))


def _cpu_sample(args: argparse.Namespace) -> float:
    """The CPU sample overlaps the probe's Paddle import, which takes longer than a second:
    a second costs nothing then. Without the import, a short one keeps the probe fast."""
    if args.cpu_sample is not None:
        return float(args.cpu_sample)
    return 0.1 if args.no_paddle else 1.0


def check_options(args: argparse.Namespace) -> CheckOptions:
    """Returns the options of check, baseline and audit (also of a logged command line)."""
    policy = build_policy(args.policy, args.mode, args.require, args.files, args.ports,
                          {"nproc_per_node": args.nproc_per_node, "nnodes": args.nnodes,
                           "server_num": args.server_num, "trainer_num": args.trainer_num},
                          args.ps_mode)
    network = None if args.no_network_tests else NetworkOptions(
        matrix=args.network_matrix,
        iperf=IperfOptions(port=args.iperf_port, seconds=args.iperf_seconds,
                           omit=args.iperf_warmup, streams=args.iperf_streams or 0),
        allreduce=AllReduceOptions(port=args.allreduce_port, sizes_mib=args.allreduce_sizes,
                                   timeout=args.allreduce_timeout,
                                   budget_s=args.allreduce_budget),
        run_allreduce=not args.no_allreduce,
        ps=PsRoundOptions(seconds=args.ps_seconds, timeout=args.ps_timeout,
                          mode=policy.ps_mode, rows=policy.ps_model.rows,
                          dim=policy.ps_model.dim, batch=policy.ps_model.batch))
    outputs = report_files(args).outputs()
    outputs["--emit-launch"] = getattr(args, "emit_launch", None)
    via = Via(args.transport)
    given = {"image": args.container_image, "name": args.container_name,
             "runtime": args.container_runtime}
    flags = {k: v for k, v in given.items() if v is not None}
    # Checked here, once; a typed layer above the inventory's and the policy's from here on.
    cli_container = container.layer(Fields("command line", flags, "--container")) \
        if flags else None
    return CheckOptions(
        policy=policy, inventory=args.inventory, python=args.python, transport=via,
        inventory_format=table.inventory_format(via, args.inventory, args.inventory_format),
        ssh_config=args.ssh_config, limit=args.limit,
        skip=tuple(dict.fromkeys(args.skip)),
        connect_timeout_given=args.connect_timeout is not None,
        collect=CollectOptions(forks=args.forks,
                               connect_timeout=args.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
                               deadline=args.deadline,
                               accept_new_host_keys=args.accept_new_host_keys,
                               cpu_sample_s=_cpu_sample(args), paddle=not args.no_paddle),
        network=network, fail_on=getattr(args, "fail_on", None) or "fail", outputs=outputs,
        log=args.log, write_log=not args.no_log,
        progress=not (args.no_progress or args.quiet), container=cli_container)


def _exit_code(run: CheckRun) -> int:
    if run.interrupted:
        return EXIT_INTERRUPTED
    if run.judgement.crashed_checks:
        return EXIT_INTERNAL
    return EXIT_GO if run.judgement.verdict is Verdict.GO else EXIT_NO_GO


def human_stream(args: argparse.Namespace) -> TextIO:
    """Where the text for people goes: stderr when a report goes to stdout ('-')."""
    to_stdout = STDOUT in report_files(args).outputs().values() or \
        getattr(args, "output", None) == STDOUT
    return sys.stderr if to_stdout else sys.stdout


def _show(report: Report, args: argparse.Namespace) -> None:
    """The terminal view of a report: the verdict line alone with -q, every finding in full
    with -v, cut to a terminal's width (whole in a file or a pipe)."""
    out = human_stream(args)
    report = scrub(report)  # its secrets hidden, as in every report file
    color = terminal.use_color(args.color, out)
    width = terminal.width_of(out)
    if args.quiet:
        out.write(terminal.verdict_line(report, color, width) + "\n")
    else:
        out.write(terminal.render(report, color=color, width=width, detail=args.verbose))


def cmd_check(args: argparse.Namespace, audit: Optional[Audit] = None) -> int:
    opts = check_options(args)
    run = pipeline.run(opts, "audit" if audit else "check", audit, args.argv)
    files.write(report_files(args), run.report)
    _show(run.report, args)
    if args.emit_launch and run.plan.nodes:
        wrote = emit_files(run.plan, args.emit_launch, pipeline.transport_of(opts).batch)
        if not args.quiet:
            print(wrote, file=human_stream(args))
    code = _exit_code(run)
    run.close_log(code)
    return code


def cmd_audit(args: argparse.Namespace) -> int:
    path = args.baseline
    base = baseline.from_document(path, jsonreport.read(path))
    return cmd_check(args, Audit(base, time.time(), args.tolerance, args.max_age))


def cmd_baseline(args: argparse.Namespace) -> int:
    opts = check_options(args)
    # The baseline file's directory is checked with the other outputs, up front.
    opts = replace(opts, outputs={**opts.outputs, "--output": args.output})
    run = pipeline.run(opts, "baseline", argv=args.argv)
    _show(run.report, args)
    code = _exit_code(run)
    run.close_log(code)
    if code != EXIT_GO and not (args.force and code == EXIT_NO_GO):
        print(f"preflight: baseline not recorded: the cluster is not GO ({args.output} "
              "untouched; --force records a NO-GO cluster)", file=sys.stderr)
        return code
    sec = baseline.section(profile.of_hosts(run.cluster.outcomes), run.cluster.network,
                           run.report.started_at or 0.0, run.report.inventory)
    jsonreport.write_atomic(args.output, jsonreport.encode(replace(run.report, baseline=sec)))
    link, ar = sec.link_bps, sec.allreduce
    print(f"baseline recorded in {args.output}: {len(sec.hosts)} hosts"
          + (f", links {rate(link)}" if link else ", no bandwidth (no network tests)")
          + (f", all-reduce busbw {ar.busbw_bytes_s / 1e9:.3g} GB/s at "
             f"{ar.bytes >> 20} MiB" if ar else ""),
          file=sys.stderr if args.output == STDOUT else sys.stdout)
    return EXIT_GO


def cmd_diff(args: argparse.Namespace) -> int:
    """Exit 0 when nothing that matters changed, 1 when something did: a gate."""
    if args.json:
        pipeline.check_outputs({"--json": args.json})
    a, b = jsonreport.read(args.first), jsonreport.read(args.second)
    changes = diff.compare(a, b, args.tolerance, args.ignore)
    if args.json:
        jsonreport.write_atomic(args.json, diff.document(changes, args.first, args.second))
    out = sys.stderr if args.json == STDOUT else sys.stdout
    shown = diff.lines(changes, terminal.HOSTS_W * 2)
    if not args.quiet:
        width = terminal.width_of(out)
        for line in shown:
            out.write(terminal.fit(visible(line), width) + "\n")
    print(f"{len(shown)} differences" + (f" ({len(changes)} host by host)"
                                          if len(changes) != len(shown) else "")
          if changes else "no differences", file=out)
    return EXIT_NO_GO if changes else EXIT_GO


def cmd_report(args: argparse.Namespace) -> int:
    if replay.is_watch_log(args.report):
        return watch_report(args)
    doc: Optional[dict[str, Any]] = None  # a saved report's: keys a later release added
    if runlog.is_log(args.report):
        report = _judge_log(args.report)
    else:
        doc = jsonreport.load(args.report)
        report = jsonreport.typed(doc, args.report)
    wanted = report_files(args)
    pipeline.check_outputs(wanted.outputs())
    report = judge.rejudged(report, args.fail_on or report.fail_on or "fail")
    files.write(wanted, report, doc)
    _show(report, args)
    return EXIT_GO if report.verdict is Verdict.GO else EXIT_NO_GO


def _judge_log(path: str) -> Report:
    """The report of what a results log holds, judged with its run's options."""
    logged = runlog.read(path)
    try:
        args = build_parser().parse_args(logged.argv)
    except SystemExit:  # argparse has printed why
        raise InputError(path, "its command line no longer parses") from None
    audit = None
    if logged.command == "audit":
        base = baseline.from_document(args.baseline, jsonreport.read(args.baseline))
        audit = Audit(base, logged.started_at, args.tolerance, args.max_age)
    run = pipeline.from_log(check_options(args), logged, audit)
    if not logged.finished or (logged.end or {}).get("killed"):
        print(f"preflight: {path}: the run stopped before it finished; judged on what it "
              f"had learned ({sum(1 for o in logged.outcomes.values() if o.ok)} of "
              f"{len(logged.hosts)} hosts answered)", file=sys.stderr)
    return run.report


def cmd_drain(args: argparse.Namespace) -> int:
    """drain and resume: print (or, with --apply, run) the scontrol lines for a report."""
    report = jsonreport.read(args.report)
    resume = args.command == "resume"
    try:
        actions = drain.plan(report, resume)
        if args.apply:
            drain.apply(actions)
    except slurm.SlurmError as e:
        if args.apply:
            raise UsageError(f"{args.command}: {e}") from None
        # A dry run off the cluster (a laptop, CI): the lines, without the nodes' states.
        actions = drain.unasked(report, resume)
        print(f"# Slurm was not asked ({e}): the nodes' states are unknown; --apply asks "
              "first and " + ("resumes only the nodes preflight drained" if resume else
                              "leaves alone the nodes someone else drained"),
              file=sys.stderr)
    for a in actions:
        done = "resumed" if resume else "drained"
        print(f"{done} {a.node}: {a.why}" if a.command is not None and args.apply
              else a.line())
    todo = [a for a in actions if a.command is not None]
    if not actions:
        print(f"nothing to {args.command}: " + ("no node of the report is drained by "
                                                "preflight and passes" if resume else
                                                "the report failed no node"))
    elif not args.apply and todo:
        print(f"# {len(todo)} node(s); run again with --apply to do it", file=sys.stderr)
    return EXIT_GO


def cmd_health(args: argparse.Namespace) -> int:
    """This node alone: one line, exit 0 healthy, 1 not; --drain makes Slurm agree."""
    if args.drain:  # before the check: no verdict line, then a refusal
        missing = [c for c in ("sinfo", "scontrol") if shutil.which(c) is None]
        if missing:
            raise UsageError(f"health --drain: {', '.join(missing)} not found: --drain asks "
                             "Slurm (run it on a Slurm node, or leave --drain out)")
    opts = CheckOptions(
        policy=build_policy(args.policy, None, [], [], None), python=args.python,
        collect=CollectOptions(deadline=args.deadline, cpu_sample_s=0.1, paddle=args.paddle),
        network=None, write_log=False, progress=False)
    run = pipeline.run(opts, "health")
    line = health.health_line(run.report)
    print(line)
    healthy = run.judgement.verdict is Verdict.GO
    if args.drain:
        node = health.this_node(args.node)
        try:
            action = health.drain_or_resume(node, run.report, line)
            if action is not None:
                drain.apply([action])
                if action.command is not None:
                    print(("resumed" if healthy else "drained") + f" {node}: {action.why}")
                elif healthy:  # left drained: say why, under the verdict's line
                    print(f"{node}: {action.why}")
        except slurm.SlurmError as e:
            # The line above stands, and so does the exit code that says it: Slurm's
            # refusal is said apart (slurmd logs a health program's standard error).
            print(f"preflight: health --drain: Slurm was not changed: {e}", file=sys.stderr)
    return EXIT_GO if healthy else EXIT_NO_GO


def cmd_launch(args: argparse.Namespace) -> int:
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        raise UsageError("launch: give the training script after --, e.g. "
                         "preflight launch --plan report.json -- train.py --epochs 1")
    nodes, source = load_plan(args.plan, args.ignore_verdict)
    via = Via(args.transport)
    inventory = args.inventory or source.inventory
    fmt = args.inventory_format if args.inventory or args.inventory_format != "auto" \
        else source.fmt
    query = HostQuery(inventory, fmt, args.ssh_config or source.ssh_config,
                      cli_timeout=args.connect_timeout is not None)
    opts = LaunchOptions(tuple(script), args.chdir, args.timeout,
                         args.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
                         args.accept_new_host_keys, args.plan, via.value)
    transport = table.new(via, lists_hosts(inventory, fmt))
    try:
        return launching.launch(transport, nodes, source, query, opts)
    finally:
        transport.close()


COMMANDS = {"check": cmd_check, "audit": cmd_audit, "baseline": cmd_baseline,
            "diff": cmd_diff, "report": cmd_report, "launch": cmd_launch,
            "drain": cmd_drain, "resume": cmd_drain, "health": cmd_health,
            "watch": cmd_watch}
