"""The emitted launch files: each plan host's env file and script."""

from __future__ import annotations

import os

from preflight.model.plan import Plan
from preflight.model.policy import JobShape
from preflight.placement.launcher import collective_node, emit, env_file


def test_emitted_env_file_and_script(tmp_path):
    node = collective_node("n1", "10.0.0.1", "/opt/paddle/bin/python", 1, 2, 1,
                           "10.0.0.2:6767", [6070, 6071], (6070, 6071), None)
    plan = Plan("collective", JobShape(), (node,), master="10.0.0.2:6767", nproc_per_node=1)
    paths = emit(plan, str(tmp_path / "launch"))
    assert sorted(os.path.basename(p) for p in paths) == ["n1.env", "n1.sh"]
    assert env_file(node) == ("POD_IP=10.0.0.1\nPADDLE_MASTER=10.0.0.2:6767\nPADDLE_NNODES=2\n"
                              "PADDLE_RANK=1\nPADDLE_NPROC_PER_NODE=1\nPORT_RANGE=6070:6071\n")
    script = (tmp_path / "launch" / "n1.sh").read_text()
    assert os.access(tmp_path / "launch" / "n1.sh", os.X_OK)
    assert "exec /opt/paddle/bin/python -m paddle.distributed.launch \"$@\"" in script
    # The script exports the env file: check with a stand-in interpreter that prints it.
    fake = tmp_path / "launch" / "n1.sh"
    fake.write_text(script.replace("exec /opt/paddle/bin/python -m paddle.distributed.launch",
                                   "exec env"))
    out = os.popen(f"sh {fake} | sort").read()
    assert "PADDLE_RANK=1\n" in out and "POD_IP=10.0.0.1\n" in out


def test_a_containers_script_runs_the_launcher_in_it_with_the_env_file(tmp_path):
    from dataclasses import replace

    from preflight.model.container import ContainerSpec
    node = collective_node("n1", "10.0.0.1", "/opt/paddle/bin/python", 1, 2, 1,
                           "10.0.0.2:6767", [6070, 6071], (6070, 6071), None)
    node = replace(node, container=ContainerSpec("podman", image="paddle:3.3.1",
                                                 network="host", shm_size="16g"))
    plan = Plan("collective", JobShape(), (node,), master="10.0.0.2:6767", nproc_per_node=1)
    emit(plan, str(tmp_path / "launch"))
    path = tmp_path / "launch" / "n1.sh"
    script = path.read_text()
    # Run it with a stand-in podman that prints the arguments it was given, one a line.
    stub = tmp_path / "podman"
    stub.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    import subprocess
    out = subprocess.run(["sh", str(path), "train.py", "--lr", "0.1"], capture_output=True,
                         text=True, env=env, timeout=30, check=True).stdout.splitlines()
    assert out == ["run", "--rm", "--name", "paddle-job-n1", "--network", "host",
                   "--shm-size", "16g", "--env-file", str(tmp_path / "launch" / "n1.env"),
                   "paddle:3.3.1", "/opt/paddle/bin/python", "-m",
                   "paddle.distributed.launch", "train.py", "--lr", "0.1"], script
