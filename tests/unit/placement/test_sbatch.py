"""The plan as a Slurm batch script: every node's launcher, picked by its node name, values
quoted so that none reaches a shell as code."""

from __future__ import annotations

import os
import subprocess

import pytest

from preflight.model.plan import Node
from preflight.placement.sbatch import batch_script


def node(host: str, rank: int, extra: str = "") -> Node:
    argv = ("/opt/py/bin/python", "-m", "paddle.distributed.launch", "--rank", str(rank))
    return Node(host, f"10.0.0.{rank + 1}", "/opt/py/bin/python", rank, 1, (6070,), argv,
                (("PADDLE_RANK", str(rank)), ("NOTE", extra)))


def test_each_node_runs_its_own_launcher_with_the_job_s_arguments(tmp_path):
    text = batch_script([node("n1", 0), node("n2", 1, "it's $(touch x) `y`")], "collective")
    assert "#SBATCH --nodes=2\n#SBATCH --nodelist=n1,n2\n" in text
    # Run the per-node part as srun would on n2, with srun replaced by a stub that runs it.
    stub = tmp_path / "srun"
    stub.write_text('#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", SLURMD_NODENAME="n2")
    script = tmp_path / "job.sbatch"
    script.write_text(text.replace("exec env ", "exec echo env "))
    p = subprocess.run(["bash", str(script), "train.py", "--lr", "0.1"], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ("env PADDLE_RANK=1 NOTE=it's $(touch x) `y` /opt/py/bin/python "
                                "-m paddle.distributed.launch --rank 1 train.py --lr 0.1")
    assert not (tmp_path / "x").exists()  # the value was data, never code
    other = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30,
                           env=dict(env, SLURMD_NODENAME="n9"), cwd=tmp_path)
    assert other.returncode == 2 and "n9 is not in the plan" in other.stderr


def test_no_plan_no_script():
    with pytest.raises(ValueError):
        batch_script([], "collective")


def test_pyxis_puts_the_container_on_the_step_and_others_run_it_per_node(tmp_path):
    from dataclasses import replace

    from preflight.model.container import ContainerSpec
    pyxis = ContainerSpec("pyxis", image="nvcr.io#nvidia/paddle:24.01", mounts=("/d:/d",))
    text = batch_script([replace(node("n1", 0), container=pyxis),
                         replace(node("n2", 1), container=pyxis)], "collective")
    srun = [ln for ln in text.splitlines() if "sh -c \"$plan\"" in ln][0]
    assert srun.strip().startswith(
        "'--container-image=nvcr.io#nvidia/paddle:24.01' --container-mounts=/d:/d sh -c")
    assert "n1) exec env PADDLE_RANK=0" in text  # the launcher itself, inside pyxis's container
    podman = ContainerSpec("podman", image="paddle:3.3.1", network="host")
    text = batch_script([replace(node("n1", 0), container=podman)], "collective")
    assert ("n1) exec podman run --rm --name paddle-job-n1 --network host paddle:3.3.1 env "
            "/opt/py/bin/python -m paddle.distributed.launch --rank 0 \"$@\" ;;") in text
    with pytest.raises(ValueError, match="same pyxis container"):
        batch_script([replace(node("n1", 0), container=pyxis), node("n2", 1)], "collective")
