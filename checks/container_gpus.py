"""The job's container is given the host's GPUs."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import pass_others, read_containers
from preflight.model.cluster import Cluster
from preflight.model.facts import GpuFacts
from preflight.model.findings import Finding, Status

NAME = "container-gpus"
ABOUT = r"""
Where the host has NVIDIA GPUs, the job's container has their device nodes (`/dev/nvidia*`,
read through its process's own root) and no `CUDA_VISIBLE_DEVICES` or
`NVIDIA_VISIBLE_DEVICES` that hides them.
"""
WHY = ("A container started without its GPUs runs Paddle on the CPU, or fails at the first "
       "GPU op, while the other ranks wait at the barrier.")
FIX = ("`docker run --gpus all`; Podman with CDI: `--device nvidia.com/gpu=all` "
       "(`nvidia-ctk cdi generate` once per host)")
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the job runs in a container on hosts with GPUs"


def check(cluster: Cluster) -> Iterator[Finding]:
    bad: list[Finding] = []
    looked = []
    for host, c, f in read_containers(cluster):
        gpu = f.gpu
        if not isinstance(gpu, GpuFacts) or not gpu.devices:
            continue  # no GPUs to pass
        looked.append(host)
        nodes = [d for d in c.nvidia if d[len("nvidia"):].isdigit()]
        env = dict(c.gpu_env)
        hidden = [f"{k}={v}" for k, v in env.items() if v.strip() in ("", "none", "void", "-1")]
        if not nodes:
            bad.append(Finding(NAME, Status.FAIL, (host,), (
                f"{host}: the job's container has none of the host's {len(gpu.devices)} GPUs: "
                "start it with --gpus all (Podman: --device nvidia.com/gpu=all)"),
                {"host_gpus": len(gpu.devices)}))
        elif hidden:
            bad.append(Finding(NAME, Status.FAIL, (host,),
                               f"{host}: the job's container hides its GPUs ({hidden[0]})",
                               {"env": env}))
        elif len(nodes) < len(gpu.devices) and not env:
            bad.append(Finding(NAME, Status.WARN, (host,), (
                f"{host}: the job's container has {len(nodes)} of the host's "
                f"{len(gpu.devices)} GPUs"), {"nodes": nodes}))
    yield from bad
    yield from pass_others(NAME, looked, bad, "the job's container has its GPUs on {n} hosts")
