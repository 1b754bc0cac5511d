"""The launcher command of each plan host, its env file and its script (pure rendering).

Two equivalent forms per host: the flags (`--master --nnodes --rank` or `--servers
--trainers`) that the JSON report and `preflight launch` use, and Paddle's own variables for
the same values (POD_IP, PADDLE_MASTER, ...: the launcher reads them in place of its flags)
that the emitted env file carries for a scheduler. Two variables have no flag and are in both:
PORT_RANGE (where the launcher looks for rank ports) and GLOO_SOCKET_IFNAME (which interface
gloo binds; otherwise where the hostname resolves, often 127.0.0.1)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from typing import Optional

from preflight.common import safewrite
from preflight.common.containercmd import command, run_argv
from preflight.model.plan import DEVICES_ENV, LAUNCHER, Endpoint, Node, Plan
from preflight.placement import sbatch

# Values written into env files and scripts: endpoints, numbers, interface names, paths.
_SAFE = re.compile(r"^[A-Za-z0-9_.:,/+@%=-]*$")


def _extra_env(gloo_ifname: Optional[str], port_range: Optional[str],
               nccl_ifname: Optional[str] = None) -> list[tuple[str, str]]:
    env = []
    if port_range:
        env.append(("PORT_RANGE", port_range))
    if gloo_ifname:
        env.append(("GLOO_SOCKET_IFNAME", gloo_ifname))
    if nccl_ifname:  # else NCCL's bootstrap picks by its own heuristic (docker0, a BMC NIC)
        env.append(("NCCL_SOCKET_IFNAME", nccl_ifname))
    return env


def collective_node(host: str, ip: str, python: str, rank: int, nnodes: int, nproc: int,
                    master: str, block: Sequence[int], ports: tuple[int, ...],
                    gloo_ifname: Optional[str], nccl_ifname: Optional[str] = None,
                    devices: Sequence[str] = ()) -> Node:
    """Returns a collective host: `--master --nnodes --rank --nproc_per_node --host`, and
    `--devices` on GPU hosts: the GPUs its ranks take, as the launcher labels them (the
    entries of the host's CUDA_VISIBLE_DEVICES, else 0..n-1), one a rank."""
    argv = [python, *LAUNCHER, "--master", master, "--nnodes", str(nnodes), "--rank", str(rank),
            "--nproc_per_node", str(nproc), "--host", ip]
    env = [("POD_IP", ip), ("PADDLE_MASTER", master), ("PADDLE_NNODES", str(nnodes)),
           ("PADDLE_RANK", str(rank)), ("PADDLE_NPROC_PER_NODE", str(nproc))]
    if devices:
        argv += ["--devices", ",".join(devices)]
        env.append((DEVICES_ENV, ",".join(devices)))
    env += _extra_env(gloo_ifname, f"{block[0]}:{block[-1]}", nccl_ifname)
    return Node(host, ip, python, rank, nproc, ports, tuple(argv), tuple(env))


def ps_node(host: str, ip: str, python: str, rank: int, servers: Sequence[Endpoint],
            trainers: Sequence[Endpoint], gloo_port: int, ports: tuple[int, ...],
            gloo_ifname: Optional[str]) -> Node:
    """Returns a PS host: the same `--servers --trainers` everywhere, its own `--host`."""
    s = ",".join(str(e) for e in servers)
    t = ",".join(str(e) for e in trainers)
    argv = (python, *LAUNCHER, "--servers", s, "--trainers", t, "--gloo_port", str(gloo_port),
            "--host", ip)
    env = [("POD_IP", ip), ("PADDLE_SERVERS_ENDPOINTS", s), ("PADDLE_TRAINERS_ENDPOINTS", t),
           ("PADDLE_GLOO_PORT", str(gloo_port)), *_extra_env(gloo_ifname, None)]
    nproc = sum(1 for e in (*servers, *trainers) if e.host == host)
    return Node(host, ip, python, rank, nproc, ports, argv, tuple(env))


def env_file(node: Node) -> str:
    """Returns the host's env file: KEY=value lines that sh and docker --env-file both read."""
    lines = []
    for k, v in node.env:
        if not _SAFE.match(v):  # never the case for what the planner produces; refuse anyway
            raise ValueError(f"{node.host}: {k} value {v!r} is not safe in an env file")
        lines.append(f"{k}={v}")
    return "\n".join(lines) + "\n"


def script(plan: Plan, node: Node) -> str:
    """Returns the host's launch script: it runs the launcher with the env file beside it
    (in the job's container where it runs in one) and the training script and arguments it
    is given."""
    role = (f"rank {node.rank} of {len(plan.nodes)}" if plan.mode == "collective" else
            f"{sum(e.host == node.host for e in plan.servers)} server(s), "
            f"{sum(e.host == node.host for e in plan.workers)} trainer(s)")
    return f"""#!/bin/sh
# preflight plan, {plan.mode} mode: {node.host} ({node.address}), {role}.
# Run on {node.host}: sh {node.host}.sh train.py [ARGS...]
# The launcher reads its settings from {node.host}.env (Paddle's own variables: POD_IP,
# PADDLE_MASTER, ...); the equivalent flags are in the JSON report's plan.
set -e
here=$(cd "$(dirname "$0")" && pwd)
{_run(node)}
"""


def _run(node: Node) -> str:
    """The script's last lines: the launcher with the env file's variables, on the host or
    in the job's container (Docker and Podman read the same file with --env-file; under
    pyxis the script runs inside the step's container already)."""
    q = shlex.quote
    box = node.container
    if box is None or not box.traits.entered_from_host or box.running:
        return (f'set -a\n. "$here/{node.host}.env"\nset +a\n'
                f'exec {q(node.python)} -m paddle.distributed.launch "$@"')
    if box.traits.takes_host_env:  # the env file sourced first is passed in
        return (f'set -a\n. "$here/{node.host}.env"\nset +a\n'
                f'exec {command(run_argv(box, [node.python, *LAUNCHER]))} "$@"')
    env_file = f"$here/{node.host}.env"  # a plain host name: safe inside double quotes
    argv = run_argv(box, [node.python, *LAUNCHER], name=f"paddle-job-{node.host}",
                    env_file=env_file)
    words = [f'"{a}"' if a == env_file else q(a) for a in argv]
    return f'exec {" ".join(words)} "$@"'



def emit(plan: Plan, directory: str, batch: bool = False) -> list[str]:
    """Writes <host>.sh and <host>.env for every plan host, and with batch the Slurm batch
    script of the whole plan; returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    written = []
    files = [(f"{node.host}.{ext}", text, mode) for node in plan.nodes
             for ext, text, mode in (("env", env_file(node), 0o644),
                                     ("sh", script(plan, node), 0o755))]
    if batch:
        files.append((sbatch.NAME, sbatch.batch_script(plan.nodes, plan.mode), 0o755))
    for name, text, mode in files:
        path = os.path.join(directory, name)
        # A temp name no one can plant a link at, its mode set on the descriptor: the
        # directory may be shared, and the script is what the operator runs next.
        safewrite.write_text(path, text, mode)
        written.append(path)
    return written


def emit_files(plan: Plan, directory: str, batch: bool = False) -> str:
    """Writes the plan's launch files (emit); returns the line that says what, and how the
    batch script is run where there is one."""
    emit(plan, directory, batch)
    line = f"launch scripts: {len(plan.nodes)} hosts in {directory}"
    return f"{line} (and {sbatch.NAME}: sbatch it with the training script)" if batch else line
