"""`preflight launch`: runs a report's plan on its hosts (a Remote each, from the transport),
streams every host's output under its name, and stops every process of the job on every host
when one host fails, when the time limit passes, or on Ctrl-C.

Every process of the job carries PREFLIGHT_LAUNCH=<token> in its environment (the launcher
passes its environment on to the ranks and servers it starts, also those it puts in their own
session), so the stop finds them all through /proc/*/environ without touching anything else."""

from __future__ import annotations

import functools
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NoReturn, Optional, TextIO

from preflight.act import launches
from preflight.common.containercmd import command, node_argv
from preflight.common.remote import Remote, Started, in_parallel
from preflight.common.visible import visible
from preflight.config.container import checked
from preflight.config.errors import InputError
from preflight.model.findings import Verdict
from preflight.model.plan import Node
from preflight.model.policy import Mode
from preflight.model.report import NodeEntry
from preflight.network.paddle_job import stop_marked
from preflight.report import jsonreport

POLL_S = 0.05
STOP_WAIT_S = 5.0  # after SIGTERM, how long the job's processes get before SIGKILL
GONE_WAIT_S = 15.0  # after SIGKILL, how long the kernel gets to end them
STOP_RUN_S = STOP_WAIT_S + GONE_WAIT_S + 10.0  # the stop command's longest on one host
REMOVE_WAIT_S = 20.0  # for the runtime to remove the job's container
STOP_EACH_S = STOP_RUN_S + REMOVE_WAIT_S + 5.0  # stop_on's longest on one host
STOP_AGAIN_S = STOP_WAIT_S + STOP_RUN_S  # launch's wait for a host's command, and a stop again
EXIT_OK, EXIT_FAILED, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 124, 130
MARKER = "PREFLIGHT_LAUNCH"


@dataclass(frozen=True)
class LaunchOptions:
    script: tuple[str, ...]  # the training script and its arguments
    chdir: Optional[str] = None  # where the launcher runs on every host (default: login dir)
    timeout: Optional[float] = None  # the whole job; None: no limit
    connect_timeout: float = 10.0
    accept_new_host_keys: bool = False
    plan: Optional[str] = None  # the report whose plan runs: the launch is recorded for it
    transport: str = "ssh"  # how the hosts are reached (recorded: a relaunch reaches them so)


@dataclass(frozen=True)
class Source:
    """The report a plan was read from, and the inventory it was made from."""

    path: str = ""  # the report
    inventory: Optional[str] = None
    fmt: str = "auto"
    ssh_config: Optional[str] = None
    mode: Mode = "collective"  # the plan's


def load_plan(path: str, ignore_verdict: bool = False) -> tuple[list[Node], Source]:
    """Returns (the plan's nodes, the inventory the report was made from) of a JSON report;
    raises InputError naming the file and the field."""
    report = jsonreport.read(path)

    def fail(why: str, field: str) -> NoReturn:
        raise InputError(path, why, field=field)

    if report.plan is None:
        fail("no plan in this report (made by preflight check --json)", "plan")
    if report.verdict is not Verdict.GO and not ignore_verdict:
        verdict = report.verdict.value if report.verdict else None
        fail(f"the report's verdict is {verdict!r}: {'; '.join(report.reasons[:2])} "
             "(--ignore-verdict launches its plan anyway)", "verdict")
    if not report.plan.nodes:
        fail("the plan has no hosts", "plan.nodes")
    nodes = [_node(n, i, fail) for i, n in enumerate(report.plan.nodes)]
    return nodes, Source(path, report.inventory, report.inventory_format or "auto",
                         report.ssh_config, report.plan.mode or "collective")


def _node(n: NodeEntry, i: int, fail: Callable[[str, str], NoReturn]) -> Node:
    at = f"plan.nodes[{i}]"
    if not n.host:
        fail("expected a host's name", f"{at}.host")
    if len(n.argv) < 3 or list(n.argv[1:3]) != ["-m", "paddle.distributed.launch"] \
            or not all(n.argv):
        fail("expected the launcher's argv: [python, -m, paddle.distributed.launch, ...]",
             f"{at}.argv")
    rank = i if n.rank is None else n.rank
    nproc = 1 if n.nproc is None else n.nproc
    if not 0 <= rank <= 1 << 20:
        fail(f"{rank} is not a count from 0 to {1 << 20}", f"{at}.rank")
    if not 1 <= nproc <= 4096:
        fail(f"{nproc} is not a count from 1 to 4096", f"{at}.nproc")
    box = None if n.container is None else checked(n.container, fail, f"{at}.container")
    return Node(n.host, n.address or "", n.argv[0], rank, nproc, (), n.argv,
                tuple(n.env.items()), box)


def host_command(node: Node, opts: LaunchOptions, token: str) -> str:
    """Returns the one command run on a host: the plan's launcher line with the script, its
    output merged, the job's marker in its environment; every value quoted."""
    q = shlex.quote
    mark = f"{MARKER}={token}"
    if node.container is not None:
        # The job's container, started as the job's, the marker inside it (its processes are
        # this host's too, so the stop finds them) and on the runtime's client outside.
        script = list(opts.script)
        if opts.chdir:  # the directory is the container's
            script = ["sh", "-c", 'cd "$0" || exit 97; exec "$@"', opts.chdir, *node.argv,
                      *script]
            inner = replace(node, argv=())
        else:
            inner = node
        argv = node_argv(inner, script, env=[mark], name=job_container(node, token))
        return "sh -c " + q(f"exec 2>&1; exec env {q(mark)} {command(argv)}")
    env = [mark, *(f"{k}={v}" for k, v in node.flag_env())]
    run = " ".join(q(a) for a in ["env", *env, *node.argv, *opts.script])
    cd = f"cd {q(opts.chdir)} || exit 97; " if opts.chdir else ""
    return "sh -c " + q(f"{cd}exec 2>&1; exec {run}")


def job_container(node: Node, token: str) -> str:
    """The name of the container a launch starts for the job on node."""
    return f"paddle-job-{node.host}-{token[:8]}"


def remove_command(node: Node, token: str) -> Optional[str]:
    """Removes the job's container on node, where the launch started one (an engine's: its
    processes stopped, the runtime may keep it, exited, when its client went first); None
    where there is none to remove. Silent where it is gone already."""
    spec = node.container
    if spec is None or spec.running or spec.traits.shape != "engine":
        return None
    argv = [spec.runtime, "rm", "--force", *spec.traits.rm_now, job_container(node, token)]
    return f"{command(argv)} >/dev/null 2>&1; true"


@dataclass(frozen=True)
class Stopped:
    """What the stop of a job's processes on one host did: ok (the stop command answered),
    how many processes it found, how many outlived SIGKILL's wait, or why it could not."""

    ok: bool
    count: int = 0
    exiting: int = 0
    why: str = ""

    def __add__(self, again: Stopped) -> Stopped:
        """This stop and a stop again after it: the later one says what is still there."""
        if not (self.ok and again.ok):
            return again
        return Stopped(True, self.count + again.count, again.exiting)

    def said(self) -> str:
        if not self.ok:
            return f"could not stop: {self.why}"
        # Still there after SIGKILL: held in the kernel, with its ports and GPU memory.
        late = (f", {self.exiting} still exiting {GONE_WAIT_S:g} s after SIGKILL (held in "
                "the kernel, as by a CPU quota, a paused container or a hung device)"
                if self.exiting else "")
        return f"{self.count} process(es) stopped{late}"


def stop_on(remote: Remote, token: str, node: Optional[Node]) -> Stopped:
    """Stops the job's processes on one host, then removes its container where the launch
    started one (node: the plan's node there, None where the plan is not at hand)."""
    done = remote.run(stop_marked(f"{MARKER}={token}", STOP_WAIT_S, GONE_WAIT_S), STOP_RUN_S)
    words = done.stdout.split()
    rm = remove_command(node, token) if node is not None else None
    if rm is not None:
        remote.run(rm, REMOVE_WAIT_S)
    if not done.ok or len(words) < 2 or words[-2] != "stopped" or not words[-1].isdigit():
        return Stopped(False, why=done.tail())
    late = words[words.index("exiting") + 1] if "exiting" in words[:-2] else "0"
    return Stopped(True, int(words[-1]), int(late) if late.isdigit() else 0)


class _Prefixer:
    """Writes a host's output line by line under its name; keeps a partial line back."""

    def __init__(self, host: str, width: int, out: TextIO, lock: threading.Lock) -> None:
        self.prefix, self.out, self.lock = f"{host:<{width}} | ", out, lock
        self.partial = b""

    def feed(self, data: bytes, final: bool = False) -> None:
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = b"" if final else lines.pop()
        text = [ln.decode("utf-8", "replace").rstrip("\r") for ln in lines]
        if final and text and text[-1] == "":
            text.pop()
        if text:
            with self.lock:
                self.out.write("".join(self.prefix + t + "\n" for t in text))
                self.out.flush()


def run(nodes: Sequence[Node], remotes: Mapping[str, Remote], opts: LaunchOptions,
        out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Runs the plan on the hosts and returns the exit code (0 when every host's launcher
    exited 0); stops the job's processes everywhere before returning."""
    token = secrets.token_hex(8)
    if opts.plan:
        launches.record(token, opts.plan, [n.host for n in nodes], opts.script, opts.chdir,
                        opts.timeout, opts.transport)
        print(f"preflight launch: job marker {MARKER}={token} (preflight watch --plan "
              f"{shlex.quote(opts.plan)} follows this job)", file=err)
    lock = threading.Lock()
    width = max(len(n.host) for n in nodes)
    started: dict[str, Started] = {}
    prefix = {n.host: _Prefixer(n.host, width, out, lock) for n in nodes}
    exits: dict[str, int] = {}
    end = time.monotonic() + opts.timeout if opts.timeout else None
    try:
        for n in nodes:
            try:
                started[n.host] = remotes[n.host].start(host_command(n, opts, token))
            except Exception as e:  # a channel refused or a connection lost since connecting
                print(f"preflight launch: {n.host}: could not start: {type(e).__name__}: "
                      f"{visible(str(e))}"
                      "; stopping the job on every host", file=err)
                return EXIT_FAILED
        while len(exits) < len(nodes):
            for host, s in started.items():
                if host in exits:
                    continue
                d = s.wait(0)
                prefix[host].feed(s.take(), final=d.exit is not None)
                if d.exit is not None:
                    exits[host] = d.exit
                    if d.exit != 0:
                        why = "could not enter --chdir" if d.exit == 97 else f"exit {d.exit}"
                        if opts.plan:
                            launches.failed(token, host, why)
                        print(f"preflight launch: {host} failed ({why}): stopping the job on "
                              "every host", file=err)
                        return EXIT_FAILED
            if end is not None and time.monotonic() > end:
                print(f"preflight launch: still running after {opts.timeout:g} s: stopping "
                      "the job on every host", file=err)
                return EXIT_TIMEOUT
            time.sleep(POLL_S)
        return EXIT_OK
    except KeyboardInterrupt:
        print("preflight launch: interrupted: stopping the job on every host", file=err)
        return EXIT_INTERRUPTED
    finally:
        _stop(nodes, remotes, token, started, exits, prefix, err)


def _stop(nodes: Sequence[Node], remotes: Mapping[str, Remote], token: str,
          started: Mapping[str, Started], exits: Mapping[str, int],
          prefix: Mapping[str, _Prefixer], err: TextIO) -> None:
    """Stops what is left of the job on every host (also after a clean end: stragglers)."""
    stopped: dict[str, Stopped] = {}

    def one(n: Node) -> None:
        did = stop_on(remotes[n.host], token, n)
        s = started.get(n.host)
        if s is not None and n.host not in exits and s.wait(STOP_WAIT_S).exit is None:
            # Its command outlived the stop: started just before it, it had not yet exec'd
            # the marked launcher when the stop looked (seen on a loaded machine). Now it has.
            did = did + stop_on(remotes[n.host], token, n)
        stopped[n.host] = did

    in_parallel([functools.partial(one, n) for n in nodes], STOP_EACH_S + STOP_AGAIN_S,
                "stop")
    for host, s in started.items():
        if host not in exits:
            prefix[host].feed(s.take(), final=True)
        s.close()
    for n in nodes:
        got = stopped.get(n.host, Stopped(False, why="no answer"))
        if not got.ok or got.count or got.exiting:
            print(f"preflight launch: {n.host}: {visible(got.said())}", file=err)
