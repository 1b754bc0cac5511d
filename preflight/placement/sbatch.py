"""The plan as one Slurm batch script (pure rendering): `sbatch preflight.sbatch train.py
[ARGS...]` asks for exactly the plan's nodes, one task each, and `srun` starts Paddle's
launcher on every node with that node's own flags and variables, picked by $SLURMD_NODENAME.

Everything a node needs is inside the script (sbatch sends it to Slurm; nothing has to be on
a shared filesystem but the training script itself). Every value is shell-quoted, and the
per-node part travels in a quoted here-document, so no value is expanded twice."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace

from preflight.common.containercmd import node_argv, pyxis_options
from preflight.model.plan import DEVICES_ENV, Node
from preflight.model.policy import Mode

NAME = "preflight.sbatch"
END = "PREFLIGHT_PLAN"


def batch_script(nodes: Sequence[Node], mode: Mode, job_name: str = "preflight-plan") -> str:
    """Returns the batch script that runs the plan's launchers on its nodes."""
    if not nodes:
        raise ValueError("a plan with no nodes has no batch script")
    q = shlex.quote
    names = ",".join(n.host for n in nodes)
    pyxis = {n.container for n in nodes if n.container is not None
             and n.container.traits.shape == "pyxis"}
    if pyxis and (len(pyxis) > 1 or any(n.container not in pyxis for n in nodes)):
        raise ValueError("pyxis runs one container for the whole step: give every node the "
                         "same pyxis container")
    # pyxis: srun enters the container for every task (--container-image); the case line
    # is the same launcher, run inside it.
    step = "".join(f"{q(o)} " for o in pyxis_options(next(iter(pyxis)))) if pyxis else ""
    cases = []
    for n in nodes:
        if n.container is not None and n.container.traits.shape != "pyxis":
            run = shlex.join(node_argv(replace(n, argv=tuple(_no_devices(n.argv)))))
            cases.append(f"  {q(n.host)}) exec {run} \"$@\" ;;")
            continue
        env = " ".join(q(f"{k}={v}") for k, v in n.env if k != DEVICES_ENV)
        cases.append(f"  {q(n.host)}) exec env {env} {shlex.join(_no_devices(n.argv))} "
                     "\"$@\" ;;")
    body = "\n".join([
        'case "$SLURMD_NODENAME" in',
        *cases,
        '  *) echo "preflight: node $SLURMD_NODENAME is not in the plan" >&2; exit 2 ;;',
        "esac",
    ])
    if END in body:
        raise ValueError(f"a plan value holds {END}")
    return f"""#!/bin/bash
#SBATCH --job-name={job_name}
#SBATCH --nodes={len(nodes)}
#SBATCH --nodelist={names}
#SBATCH --ntasks-per-node=1
# preflight plan, {mode} mode, {len(nodes)} nodes: {names}. Node names are plain (the
# inventory refuses others), so the #SBATCH lines, which no shell reads, need no quoting.
# Submit with the training script and its arguments: sbatch {NAME} train.py [ARGS...]
# (each node runs it from the job's working directory: --chdir, else the submit directory).
set -eu
plan=$(cat <<'{END}'
{body}
{END}
)
exec srun --nodes={len(nodes)} --ntasks-per-node=1 --nodelist={q(names)} --kill-on-bad-exit=1 \\
    {step}sh -c "$plan" preflight "$@"
"""


def _no_devices(argv: Sequence[str]) -> list[str]:
    """The launcher command less --devices: in a batch job Slurm's GPU allocation sets
    CUDA_VISIBLE_DEVICES, and the labels the login environment gave may not be in it."""
    out = list(argv)
    if "--devices" in out:
        at = out.index("--devices")
        del out[at:at + 2]
    return out
