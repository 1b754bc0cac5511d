"""The checks: pure functions over the facts of all hosts, listed explicitly below.

A check takes a Cluster and yields Findings. It never opens a connection or a file:
everything it judges was collected before it runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from preflight.checks import cpu, gpu, paddle_stack, reachability

from preflight.model import Cluster, Finding


@dataclass(frozen=True)
class CheckSpec:
    name: str
    run: Callable[[Cluster], Iterable[Finding]]
    summary: str


ALL_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(reachability.NAME, reachability.check, "every host reached over SSH and probed"),
    CheckSpec(gpu.NAME, gpu.check, "GPU model, count, memory, compute capability and driver "
              "alike across hosts"),
    CheckSpec(paddle_stack.NAME, paddle_stack.check, "Paddle importable; Paddle, CUDA, cuDNN, "
              "NCCL and Python identical on every host"),
    CheckSpec(cpu.NAME, cpu.check, "effective CPU cores not far below the cluster median"),
)
