"""Command line: arguments -> collect -> checks -> verdict -> reports -> exit code."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, Optional

from preflight import __version__, launchcmd
from preflight.allreduce import AllReduceOptions
from preflight.collect import CollectOptions, collect, local_host
from preflight.engine import judge, run_checks
from preflight.errors import InputError
from preflight.inventory import load
from preflight.iperfrun import IperfOptions
from preflight.launch import LaunchOptions, load_plan
from preflight.launch import connect as launch_connect
from preflight.launch import run as launch_run
from preflight.measure import NetworkTests
from preflight.model import Cluster, Stage, Verdict
from preflight.netbench import NetworkOptions, resolve_ip, run_network_tests
from preflight.planner import plan as make_plan
from preflight.policy import build as build_policy
from preflight.remote import SshRemote
from preflight.report import jsonreport, terminal

EXIT_GO, EXIT_NO_GO, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """An operator error: printed as one line, exit code 2."""


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="preflight", description=(
        "Pre-flight readiness check for PaddlePaddle distributed training clusters. "
        "Exit codes: 0 GO, 1 NO-GO, 2 bad invocation or inventory, 3 internal error."))
    p.add_argument("--version", action="version", version=f"preflight {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check the hosts of an inventory (or this machine)")
    c.add_argument("-i", "--inventory", help="inventory file (YAML); without it, this "
                   "machine is audited locally, without SSH")
    c.add_argument("--json", metavar="FILE", help="write the JSON report here (atomically)")
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
    c.add_argument("--cpu-sample", type=_positive(float), default=0.5, metavar="S",
                   help="CPU utilisation sampling window on each host (default: 0.5)")
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
    c.add_argument("--no-progress", action="store_true", help="no live progress line")
    c.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
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
    return p


def _raise_interrupt(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


def cmd_check(args: argparse.Namespace) -> int:
    policy = build_policy(args.policy, args.mode, args.require, args.files, args.ports,
                          {"nproc_per_node": args.nproc_per_node, "nnodes": args.nnodes,
                           "server_num": args.server_num, "trainer_num": args.trainer_num})
    if args.inventory:
        hosts = load(args.inventory)
    else:
        hosts = [local_host(python=args.python)]
    for flag, path in (("--json", args.json), ("--emit-launch", args.emit_launch)):
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            raise UsageError(f"{flag} {path}: directory {parent} does not exist")
    # The active tests need peers: a local audit of one machine has none.
    active = not args.no_network_tests and len(hosts) > 1
    opts = CollectOptions(forks=args.forks, connect_timeout=args.connect_timeout,
                          deadline=args.deadline,
                          accept_new_host_keys=args.accept_new_host_keys,
                          cpu_sample_s=args.cpu_sample, files=policy.files,
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
    cluster = Cluster(tuple(outcomes), policy, network)
    findings = run_checks(cluster)
    ips = {h.name: ip for h in hosts if (ip := resolve_ip(h.address)) is not None}
    plan = make_plan(cluster, findings, ips)
    judgement = judge(cluster, findings, plan)
    interrupted = collect_interrupted or bool(network and network.interrupted)
    if args.json:
        meta = {"started_at": started, "duration_s": round(time.time() - started, 3),
                "inventory": os.path.abspath(args.inventory) if args.inventory else None,
                "interrupted": interrupted}
        jsonreport.write_atomic(args.json, jsonreport.document(cluster, judgement, meta, plan))
    sys.stdout.write(terminal.render(judgement, color=sys.stdout.isatty(), plan=plan))
    if args.emit_launch and plan.nodes:
        written = launchcmd.emit(plan, args.emit_launch)
        print(f"launch scripts: {len(written) // 2} hosts in {args.emit_launch}")
    if interrupted:
        return EXIT_INTERRUPTED
    if judgement.crashed_checks:
        return EXIT_INTERNAL
    return EXIT_GO if judgement.verdict is Verdict.GO else EXIT_NO_GO


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
    args = parser.parse_args(argv)  # exits 2 with argparse's own one-line error
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else
                        logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.command == "demo":
            from preflight.demo import run_demo  # only the demo needs the testbed

            return run_demo(args.hosts)
        if args.command == "launch":
            return cmd_launch(args)
        return cmd_check(args)
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
