"""NCCL all-reduce through Paddle's launcher on this machine's GPUs (one rank per GPU).

Needs an NVIDIA GPU and a GPU build of Paddle: PREFLIGHT_GPU_PYTHON names its interpreter
(default: python3). Skipped cleanly elsewhere; CI has no GPU."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import NO_GPU

from preflight.network.allreduce import run_allreduce
from preflight.network.allreduce_cmd import AllReduceOptions
from preflight.network.paddle_job import Member
from preflight.transport.local.run import LocalRemote

pytestmark = pytest.mark.gpu

PYTHON = os.environ.get("PREFLIGHT_GPU_PYTHON", "python3")


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    return sum(1 for ln in p.stdout.splitlines() if ln.startswith("GPU "))


def paddle_has_cuda() -> bool:
    p = subprocess.run([PYTHON, "-c", "import paddle, sys; "
                        "sys.exit(0 if paddle.is_compiled_with_cuda() else 1)"],
                       capture_output=True, timeout=120)
    return p.returncode == 0


def test_nccl_allreduce_on_local_gpus():
    n = gpu_count()
    if n == 0:
        pytest.skip(NO_GPU)
    if not paddle_has_cuda():
        pytest.skip(f"{PYTHON} has no GPU build of Paddle (set PREFLIGHT_GPU_PYTHON)")
    member = Member("local", LocalRemote("local"), PYTHON, "127.0.0.1", nproc=n)
    r = run_allreduce([member], "nccl", AllReduceOptions(sizes_mib=(1.0, 64.0), timeout=300))
    assert r.error is None, (r.error, dict(r.failed))
    assert r.backend == "nccl" and r.ranks == n
    assert [s.nbytes for s in r.sizes] == [1 << 20, 64 << 20]
    assert all(s.seconds > 0 for s in r.sizes)
    if n > 1:
        assert all(s.busbw > 0 for s in r.sizes)
