"""The checks: pure functions over the facts of all hosts, listed explicitly below.

A check takes a Cluster and yields Findings. It never opens a connection or a file:
everything it judges was collected before it runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from preflight.checks import (
    allreduce,
    bandwidth,
    baseline,
    clock,
    compat,
    cpu,
    env,
    files,
    gpu,
    gpu_health,
    limits,
    network,
    paddle_stack,
    pins,
    ports,
    reachability,
)
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
    CheckSpec(gpu_health.NAME, gpu_health.check, "no uncorrectable ECC errors, pending "
              "retirement/remapping, slowdowns, busy GPUs or degraded PCIe links"),
    CheckSpec(compat.NAME, compat.check, "driver new enough for Paddle's CUDA, GPU "
              "architectures covered, CUDA build on GPU hosts, PS core in PS mode"),
    CheckSpec(pins.NAME, pins.check, "the policy's version pins hold on every host"),
    CheckSpec(cpu.NAME, cpu.check, "effective CPU cores not far below the cluster median"),
    CheckSpec(env.NAME, env.check, "training variables alike; none set to a hurtful value"),
    CheckSpec(files.NAME, files.check, "training script and configs identical on every host"),
    CheckSpec(network.NAME, network.check, "one MTU on the interfaces the job uses"),
    CheckSpec(clock.NAME, clock.check, "host clocks agree within the policy's bounds"),
    CheckSpec(limits.SHM, limits.check_shm, "/dev/shm large enough for data loaders"),
    CheckSpec(limits.TMP, limits.check_tmp, "free space in the temp directory"),
    CheckSpec(limits.NOFILE, limits.check_nofile, "open-files limit high enough"),
    CheckSpec(ports.NAME, ports.check, "the launcher's ports are free on every host"),
    CheckSpec(bandwidth.NAME, bandwidth.check, "iperf3: no host or path far below the "
              "cluster's median host (or the policy floor); low loss"),
    CheckSpec(allreduce.NAME, allreduce.check, "a real all-reduce (NCCL or gloo) runs on "
              "every host; busbw as the links predict or the policy asks"),
    CheckSpec(baseline.NAME, baseline.check, "audit: GPU, driver, Paddle stack, NIC speed "
              "and MTU as in the baseline; bandwidth within its tolerance"),
)
