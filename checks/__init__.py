"""The checks: pure functions over the facts of all hosts, listed explicitly below.

A check takes a Cluster and yields Findings. It never opens a connection or a file:
everything it judges was collected before it runs. Each check lives in the module named for
it (`mtu.py` holds the check `mtu`, `cpu_cores.py` holds `cpu-cores`); common.py,
compat_table.py and retests.py (bandwidth's) are helpers. A new check is its module plus one
line in ALL_CHECKS."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from preflight.checks import (
    allreduce,
    bandwidth,
    baseline,
    clock,
    container,
    container_gpus,
    container_network,
    container_rdma,
    cpu_cores,
    env,
    files,
    gpu_health,
    gpu_homogeneous,
    ib_ports,
    memlock,
    memory,
    mtu,
    neighbours,
    nic_speed,
    nofile,
    paddle_stack,
    pins,
    ports,
    ps_fanin,
    ps_round,
    reachable,
    shm,
    stack_compat,
    tmp,
)
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding


def sentence(text: str) -> str:
    """text as a sentence: a capital first, a full stop last (docs/checks.md, a finding's fix)."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


@dataclass(frozen=True)
class CheckSpec:
    name: str
    run: Callable[[Cluster], Iterable[Finding]]
    summary: str
    # Compares hosts with each other: on a single host its pass means nothing ("n/a").
    across: bool = False

    @property
    def fix(self) -> str:
        """The check's fix as its module states it (FIX, also in docs/checks.md), a
        sentence."""
        return sentence(str(sys.modules[self.run.__module__].FIX))

    @property
    def applies(self) -> str:
        """When the check has something to judge (its module's APPLIES; "" for a check
        that judges every run)."""
        return str(getattr(sys.modules[self.run.__module__], "APPLIES", ""))


ALL_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(reachable.NAME, reachable.check, "every host reached over SSH and probed"),
    CheckSpec(container.NAME, container.check, "the job's container: its image on every "
              "host, started as the job would be, one image ID everywhere", across=True),
    CheckSpec(container_network.NAME, container_network.check, "the job's container on the "
              "host's network"),
    CheckSpec(container_gpus.NAME, container_gpus.check, "the job's container has the host's "
              "GPUs"),
    CheckSpec(container_rdma.NAME, container_rdma.check, "the job's container has the RDMA "
              "devices where the host has active RDMA ports"),
    CheckSpec(gpu_homogeneous.NAME, gpu_homogeneous.check, "GPU model, count, memory, "
              "compute capability and driver alike across hosts", across=True),
    CheckSpec(paddle_stack.NAME, paddle_stack.check, "Paddle importable; Paddle, CUDA, cuDNN, "
              "NCCL and Python identical on every host"),
    CheckSpec(gpu_health.NAME, gpu_health.check, "no uncorrectable ECC errors, pending "
              "retirement/remapping, slowdowns, busy GPUs or degraded PCIe links"),
    CheckSpec(stack_compat.NAME, stack_compat.check, "driver new enough for Paddle's CUDA, GPU "
              "architectures covered, CUDA build on GPU hosts, PS core in PS mode"),
    CheckSpec(pins.NAME, pins.check, "the policy's version pins hold on every host"),
    CheckSpec(cpu_cores.NAME, cpu_cores.check, "effective CPU cores not far below the "
              "cluster median", across=True),
    CheckSpec(memory.NAME, memory.check, "memory the job may use not far below the cluster "
              "median", across=True),
    CheckSpec(env.NAME, env.check, "training variables alike; none set to a hurtful value"),
    CheckSpec(files.NAME, files.check, "training script and configs identical on every host",
              across=True),
    CheckSpec(mtu.NAME, mtu.check, "one MTU on the interfaces the job uses", across=True),
    CheckSpec(ib_ports.NAME, ib_ports.check, "on RDMA hosts some InfiniBand/RoCE port is "
              "ACTIVE, at the rate most hosts have"),
    CheckSpec(nic_speed.NAME, nic_speed.check, "one negotiated speed on the interfaces the "
              "job uses", across=True),
    CheckSpec(clock.NAME, clock.check, "host clocks agree within the policy's bounds", across=True),
    CheckSpec(shm.NAME, shm.check, "/dev/shm large enough for data loaders"),
    CheckSpec(tmp.NAME, tmp.check, "free space in the temp directory"),
    CheckSpec(nofile.NAME, nofile.check, "open-files limit high enough"),
    CheckSpec(memlock.NAME, memlock.check, "locked memory unlimited where RDMA is used"),
    CheckSpec(neighbours.NAME, neighbours.check, "the kernel's neighbour table holds the "
              "job's mesh (gc_thresh3), hosts sharing one kernel counted together"),
    CheckSpec(ports.NAME, ports.check, "the launcher's ports are free on every host"),
    CheckSpec(bandwidth.NAME, bandwidth.check, "iperf3: no host or path far below the "
              "cluster's median host (or the policy floor); low loss"),
    CheckSpec(ps_fanin.NAME, ps_fanin.check, "PS jobs: each server host takes all its "
              "trainers' pushes at once", across=True),
    CheckSpec(ps_round.NAME, ps_round.check, "PS jobs: a short real PS job runs on the plan; "
              "no server holds every trainer, no trainer lags", across=True),
    CheckSpec(allreduce.NAME, allreduce.check, "a real all-reduce (NCCL or gloo) runs on "
              "every host; busbw as the links predict or the policy asks"),
    CheckSpec(baseline.NAME, baseline.check, "audit: GPU, driver, Paddle stack, NIC speed "
              "and MTU as in the baseline; bandwidth within its tolerance"),
)
