"""Command line: arguments -> collect -> checks -> verdict -> reports -> exit code."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, Optional

from preflight import __version__, baseline, diff, launchcmd, runcheck, runlog
from preflight.baseline import DEFAULT_MAX_AGE_S, DEFAULT_TOLERANCE, Audit
from preflight.engine import FAIL_ON
from preflight.errors import InputError
from preflight.inventory import load
from preflight.launch import LaunchOptions, load_plan
from preflight.launch import connect as launch_connect
from preflight.launch import run as launch_run
from preflight.model import Verdict
from preflight.remote import SshRemote
from preflight.report import jsonreport, summary, terminal
from preflight.report.summary import rate
from preflight.runcheck import CheckRun, UsageError

EXIT_GO, EXIT_NO_GO, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _positive(kind: type[float] | type[int]):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float | int:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return v
    return parse


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= v <= 65533:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65533, got {text}")
    return v


def _sizes(text: str) -> tuple[float, ...]:
    try:
        sizes = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes in MiB like '1,8,32', got {text!r}",
                                         ) from None
    if not sizes or any(not 0 < x <= 4096 for x in sizes):
        raise argparse.ArgumentTypeError(f"sizes are MiB from above 0 to 4096, got {text!r}")
    return sizes


def _duration(text: str) -> float:
    """Parses '24h', '90m', '2d', '30s' or plain seconds into seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    num, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        v = float(num) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration like 24h, 90m or 3600, "
                                         f"got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return v


def _fraction(text: str) -> float:
    """Parses a tolerance: '0.2' or '20%'."""
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.2 or 20%, got {text!r}",
                                         ) from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to below 1 (0%..99%), got {text}")
    return v


def _check_options(c: argparse.ArgumentParser, inventory_required: bool = False) -> None:
    """The options of a check run, shared by check, baseline and audit."""
    if inventory_required:
        c.add_argument("-i", "--inventory", required=True, help="inventory file (YAML)")
    else:
        c.add_argument("-i", "--inventory", help="inventory file (YAML); without it, this "
                       "machine is audited locally, without SSH")
    c.add_argument("--forks", type=_positive(int), default=32,
                   help="hosts probed at once (default: 32)")
    c.add_argument("--connect-timeout", type=_positive(float), default=10.0, metavar="S",
                   help="TCP connect, SSH banner and auth timeout in seconds (default: 10)")
    c.add_argument("--deadline", type=_positive(float), default=60.0, metavar="S",
                   help="per-host limit from connect to facts, in seconds (default: 60)")
    c.add_argument("--accept-new-host-keys", action="store_true",
                   help="record the keys of hosts not yet in known_hosts (like OpenSSH's "
                   "StrictHostKeyChecking=accept-new); changed keys are always refused")
    c.add_argument("--python", default="python3",
                   help="training interpreter for the local audit (default: python3)")
    c.add_argument("--cpu-sample", type=_positive(float), default=0.1, metavar="S",
                   help="CPU utilisation sampling window on each host; it spans the probe's "
                   "own work, and the 1-minute load average gives the history (default: 0.1)")
    c.add_argument("--no-paddle", action="store_true",
                   help="do not import Paddle on the hosts (about 1 s of CPU each): the "
                   "Paddle checks then say 'could not check'")
    c.add_argument("--policy", metavar="FILE", help="YAML policy: mode, require, files, "
                   "ports, limits (flags below add to or override it)")
    c.add_argument("--mode", choices=("collective", "ps"),
                   help="job mode (default collective); ps requires the PS core")
    c.add_argument("--require", action="append", default=[], metavar="PIN",
                   help="version pin, e.g. 'paddle>=2.6,<3' or 'driver>=535' (repeatable; "
                   "names: paddle, driver, cuda, cudnn, nccl, python)")
    c.add_argument("--file", action="append", default=[], metavar="PATH", dest="files",
                   help="training script or config that must be identical on every host "
                   "(repeatable)")
    c.add_argument("--ports", metavar="LIST",
                   help="ports the plan may use, e.g. '6070-6077,6767'; they must be free "
                   "(default: the plan picks free ones from 6070 up and 6767 up)")
    j = c.add_argument_group("the job to place (a sized job is GO when it fits on the hosts "
                             "that passed; the others are left out with their reasons)")
    j.add_argument("--nproc-per-node", type=_positive(int), metavar="N",
                   help="collective: ranks per worker host (default: its GPU count, 1 on CPU)")
    j.add_argument("--nnodes", type=_positive(int), metavar="N",
                   help="collective: worker hosts (default: every host of the inventory)")
    j.add_argument("--server-num", type=_positive(int), metavar="S",
                   help="ps: parameter servers in all (default 1)")
    j.add_argument("--trainer-num", type=_positive(int), metavar="T",
                   help="ps: trainers in all (default: one per host)")
    j.add_argument("--emit-launch", metavar="DIR",
                   help="write <host>.sh and <host>.env for every host of the plan")
    n = c.add_argument_group("active tests (iperf3 between hosts, then an all-reduce)")
    n.add_argument("--no-network-tests", action="store_true",
                   help="skip iperf3 and the all-reduce (facts and static checks only)")
    n.add_argument("--network-matrix", action="store_true",
                   help="iperf3 between every pair of hosts (n-1 rounds each way) instead "
                   "of the ring (4 rounds, 6 for an odd count): for audits")
    n.add_argument("--iperf-seconds", type=_positive(int), default=3, metavar="S",
                   help="length of each iperf3 run (default: 3)")
    n.add_argument("--iperf-port", type=_port, default=5201, metavar="PORT",
                   help="port of the iperf3 servers (default: 5201)")
    n.add_argument("--no-allreduce", action="store_true", help="iperf3 only")
    n.add_argument("--allreduce-port", type=_port, default=36000, metavar="PORT",
                   help="the launcher's master port; gloo uses PORT+1, the ranks PORT+2.. "
                   "(default: 36000)")
    n.add_argument("--allreduce-sizes", type=_sizes, default=(1.0, 8.0, 32.0), metavar="MIB",
                   help="all-reduce message sizes in MiB, e.g. '1,8,32' (the default)")
    n.add_argument("--allreduce-timeout", type=_positive(float), default=120.0, metavar="S",
                   help="limit for the all-reduce on each host (default: 120)")
    c.add_argument("--log", metavar="FILE", help="results log (JSON lines, appended as hosts "
                   "answer; `preflight report FILE` judges it even if the run was killed). "
                   "Default: a new file in $XDG_STATE_HOME/preflight/runs (~/.local/state), "
                   "the last 20 kept")
    c.add_argument("--no-log", action="store_true", help="write no results log")
    c.add_argument("--no-progress", action="store_true", help="no live progress line")
    c.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")


def _report_options(c: argparse.ArgumentParser, fail_on_default: Optional[str] = "fail",
                    ) -> None:
    """Report files and the exit-code rule, shared by check, audit and report."""
    r = c.add_argument_group("reports (each written atomically; see README, CI)")
    r.add_argument("--json", metavar="FILE", help="the JSON report (preflight launch, "
                   "diff and report read it)")
    r.add_argument("--junit", metavar="FILE", help="JUnit XML: a test suite per host (facts "
                   "as properties), a test case per check and host")
    r.add_argument("--markdown", metavar="FILE", help="Markdown summary (also appended to "
                   "$GITHUB_STEP_SUMMARY when that is set)")
    r.add_argument("--html", metavar="FILE", help="self-contained HTML report with the "
                   "bandwidth heatmap and the all-reduce chart")
    r.add_argument("--no-step-summary", action="store_true",
                   help="do not append to $GITHUB_STEP_SUMMARY")
    r.add_argument("--fail-on", choices=FAIL_ON, default=fail_on_default,
                   help="what makes NO-GO and exit 1: 'fail' (failures, hosts that could "
                   "not be checked, check errors) or 'warn' (warnings too); default: "
                   + (fail_on_default or "the report's own"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="preflight", description=(
        "Pre-flight readiness check for PaddlePaddle distributed training clusters. "
        "Exit codes: 0 GO, 1 NO-GO (diff: differences), 2 bad invocation or input, "
        "3 internal error, 130 interrupted."))
    p.add_argument("--version", action="version", version=f"preflight {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check the hosts of an inventory (or this machine)")
    _check_options(c)
    _report_options(c)
    b = sub.add_parser("baseline", help="record a known-good cluster's facts and "
                       "measurements: preflight baseline -i inventory.yaml -o baseline.json")
    b.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the baseline file to write (a JSON report with a baseline section)")
    b.add_argument("--force", action="store_true",
                   help="record it even when the cluster is NO-GO")
    _check_options(b, inventory_required=True)
    a = sub.add_parser("audit", help="compare new nodes with a baseline: preflight audit "
                       "-i new-nodes.yaml --baseline baseline.json")
    a.add_argument("--baseline", required=True, metavar="FILE",
                   help="made by preflight baseline")
    a.add_argument("--tolerance", type=_fraction, default=DEFAULT_TOLERANCE, metavar="F",
                   help="bandwidth and all-reduce may be this much below the baseline's "
                   "(default: 0.2, i.e. 20%%)")
    a.add_argument("--max-age", type=_duration, default=DEFAULT_MAX_AGE_S, metavar="AGE",
                   help="flag baseline measurements older than this (default: 24h)")
    _check_options(a, inventory_required=True)
    _report_options(a)
    df = sub.add_parser("diff", help="what changed between two reports or baselines")
    df.add_argument("first", metavar="A.json")
    df.add_argument("second", metavar="B.json")
    df.add_argument("--tolerance", type=_fraction, default=DEFAULT_TOLERANCE, metavar="F",
                    help="bandwidth changes smaller than this are not listed (default: 0.2)")
    rp = sub.add_parser("report", help="render a saved JSON report again: preflight report "
                        "r.json --html r.html --junit r.xml --markdown r.md")
    rp.add_argument("report", metavar="REPORT.json", help="a JSON report, or a results log "
                    "(--log), also of a run that was killed")
    _report_options(rp, fail_on_default=None)
    la = sub.add_parser("launch", help="run the plan of a report on its hosts over SSH: "
                        "preflight launch --plan report.json -- train.py ARGS")
    la.add_argument("--plan", required=True, metavar="REPORT",
                    help="JSON report of preflight check (its plan is run)")
    la.add_argument("-i", "--inventory", help="inventory for the SSH settings (default: the "
                    "one the report was made from)")
    la.add_argument("--chdir", metavar="DIR", help="directory on every host to launch from "
                    "(default: the login directory)")
    la.add_argument("--timeout", type=_positive(float), metavar="S",
                    help="stop the job on every host after S seconds (default: no limit)")
    la.add_argument("--connect-timeout", type=_positive(float), default=10.0, metavar="S")
    la.add_argument("--accept-new-host-keys", action="store_true")
    la.add_argument("--ignore-verdict", action="store_true",
                    help="launch the plan of a NO-GO report")
    la.add_argument("script", nargs=argparse.REMAINDER,
                    help="-- then the training script and its arguments")
    d = sub.add_parser("demo", help="build a simulated cluster on this machine (root), check "
                       "it healthy and with faults, remove it")
    d.add_argument("--hosts", type=_positive(int), default=5, help="simulated hosts (default 5)")
    d.add_argument("--reports", default="preflight-demo", metavar="DIR",
                   help="where each check's JSON, HTML, JUnit and Markdown reports go "
                   "(default: ./preflight-demo)")
    return p


def _raise_interrupt(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


def _exit_code(run: CheckRun) -> int:
    if run.interrupted:
        return EXIT_INTERRUPTED
    if run.judgement.crashed_checks:
        return EXIT_INTERNAL
    return EXIT_GO if run.judgement.verdict is Verdict.GO else EXIT_NO_GO


def _show(run: CheckRun) -> None:
    sys.stdout.write(terminal.render(run.judgement, color=sys.stdout.isatty(), plan=run.plan))


def cmd_check(args: argparse.Namespace, audit: Optional[Audit] = None) -> int:
    run = runcheck.run(args, "audit" if audit else "check", audit, args.argv)
    runcheck.write_reports(args, run.doc)
    _show(run)
    if args.emit_launch and run.plan.nodes:
        written = launchcmd.emit(run.plan, args.emit_launch)
        print(f"launch scripts: {len(written) // 2} hosts in {args.emit_launch}")
    code = _exit_code(run)
    run.close_log(code)
    return code


def cmd_audit(args: argparse.Namespace) -> int:
    path = args.baseline
    base = baseline.from_document(path, jsonreport.read(path))
    return cmd_check(args, Audit(base, time.time(), args.tolerance, args.max_age))


def cmd_baseline(args: argparse.Namespace) -> int:
    args.json = args.output  # its directory is checked with the other outputs, up front
    run = runcheck.run(args, "baseline", argv=args.argv)
    _show(run)
    code = _exit_code(run)
    run.close_log(code)
    if code != EXIT_GO and not (args.force and code == EXIT_NO_GO):
        print(f"preflight: baseline not recorded: the cluster is not GO ({args.output} "
              "untouched; --force records a NO-GO cluster)", file=sys.stderr)
        return code
    doc = dict(run.doc, baseline=baseline.section(
        run.cluster.outcomes, run.cluster.network, run.doc["started_at"], run.doc["inventory"]))
    jsonreport.write_atomic(args.output, doc)
    sec = doc["baseline"]
    link = sec["link_bps"]
    ar = sec["allreduce"]
    print(f"baseline recorded in {args.output}: {len(sec['hosts'])} hosts"
          + (f", links {rate(link)}" if link else ", no bandwidth (no network tests)")
          + (f", all-reduce busbw {ar['busbw_bytes_s'] / 1e9:.3g} GB/s at "
             f"{ar['bytes'] >> 20} MiB" if ar else ""))
    return EXIT_GO


def cmd_diff(args: argparse.Namespace) -> int:
    a, b = jsonreport.read(args.first), jsonreport.read(args.second)
    changes = diff.compare(a, b, args.tolerance)
    for ch in changes:
        print(ch.text)
    print(f"{len(changes)} differences" if changes else "no differences")
    return EXIT_NO_GO if changes else EXIT_GO


def cmd_report(args: argparse.Namespace) -> int:
    if runlog.is_log(args.report):
        doc = _judge_log(args.report)
    else:
        doc = jsonreport.read(args.report)
    runcheck.check_outputs(args)
    fail_on = args.fail_on or doc.get("fail_on") or "fail"
    warnings = [str(f.get("message")) for f in doc.get("findings") or []
                if f.get("status") == "warn"]
    if fail_on == "warn" and doc.get("fail_on") != "warn" and warnings:
        # Judged leniently when it ran: under the stricter rule its warnings block too.
        doc = dict(doc, verdict="no-go", reasons=list(doc.get("reasons") or []) + warnings)
    doc = dict(doc, fail_on=fail_on)
    runcheck.write_reports(args, doc)
    sys.stdout.write(f"{summary.verdict_text(doc)}: " + "; ".join(
        str(r) for r in doc.get("reasons") or []) + "\n")
    return EXIT_GO if doc.get("verdict") == "go" else EXIT_NO_GO


def _judge_log(path: str) -> dict[str, Any]:
    """The report document of what a results log holds, judged with its run's options."""
    logged = runlog.read(path)
    try:
        args = build_parser().parse_args(logged.argv)
    except SystemExit:  # argparse has printed why
        raise InputError(path, "its command line no longer parses") from None
    audit = None
    if logged.command == "audit":
        base = baseline.from_document(args.baseline, jsonreport.read(args.baseline))
        audit = Audit(base, logged.started_at, args.tolerance, args.max_age)
    run = runcheck.from_log(args, logged, audit)
    if not logged.finished or (logged.end or {}).get("killed"):
        print(f"preflight: {path}: the run stopped before it finished; judged on what it "
              f"had learned ({sum(1 for o in logged.outcomes.values() if o.ok)} of "
              f"{len(logged.hosts)} hosts answered)", file=sys.stderr)
    return run.doc


def cmd_launch(args: argparse.Namespace) -> int:
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        raise UsageError("launch: give the training script after --, e.g. "
                         "preflight launch --plan report.json -- train.py --epochs 1")
    nodes, inventory = load_plan(args.plan, args.ignore_verdict)
    inventory = args.inventory or inventory
    if not inventory:
        raise UsageError(f"--plan {args.plan}: the report names no inventory (a local audit?); "
                         "pass -i INVENTORY")
    hosts = {h.name: h for h in load(inventory)}
    missing = [n.host for n in nodes if n.host not in hosts]
    if missing:
        raise UsageError(f"--plan {args.plan}: host {missing[0]} is not in {inventory}")
    opts = LaunchOptions(tuple(script), args.chdir, args.timeout, args.connect_timeout,
                         args.accept_new_host_keys)
    conns, failed = launch_connect(nodes, hosts, opts)
    try:
        if failed:
            for host, why in failed.items():
                print(f"preflight launch: {host}: {why}", file=sys.stderr)
            print("preflight launch: nothing started", file=sys.stderr)
            return EXIT_NO_GO
        remotes = {n: SshRemote(n, c, args.connect_timeout) for n, c in conns.items()}
        return launch_run(nodes, remotes, opts)
    finally:
        for conn in conns.values():
            conn.close()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)  # exits 2 with argparse's own one-line error
    args.argv = argv  # the results log keeps the command line: `report LOG` re-reads it
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else
                        logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.command == "demo":
            from preflight.demo import run_demo  # only the demo needs the testbed

            return run_demo(args.hosts, args.reports)
        commands = {"launch": cmd_launch, "baseline": cmd_baseline, "audit": cmd_audit,
                    "diff": cmd_diff, "report": cmd_report, "check": cmd_check}
        return commands[args.command](args)
    except (InputError, UsageError) as e:
        print(f"preflight: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("preflight: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: say so in one line, with where, not a bare traceback
        if getattr(args, "verbose", False):
            raise
        print(f"preflight: internal error: {type(e).__name__}: {e} (run with -v for "
              f"the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
