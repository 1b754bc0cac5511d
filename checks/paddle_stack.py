"""Paddle importable everywhere, and Paddle/CUDA/cuDNN/NCCL/Python identical on every host."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import compare, could_not_check, passed, sections
from preflight.common.profile import field_value, python_minor
from preflight.model.cluster import Cluster
from preflight.model.facts import PaddleFacts
from preflight.model.findings import Finding, Status

NAME = "paddle-stack"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Paddle imports with each host's `python`, and Paddle version, commit (between hosts of the same
version), CUDA, cuDNN, NCCL (as built, and as loaded at run time on GPU builds:
`paddle.base.core.nccl_version()`, `paddle.device.get_cudnn_version()`, since the library that
runs comes from the host's `nvidia-nccl-cu*`/`nvidia-cudnn-cu*` wheels) and the Python minor
version are identical everywhere; `nccl` and `cudnn` pins hold the loaded library where it was
read. Mismatched NCCL is the classic cause of hangs and "Mismatched NCCL version".
"""
WHY = ("Ranks built from different Paddle, CUDA, cuDNN or NCCL releases disagree on the wire: "
       'NCCL refuses to connect ("Mismatched NCCL version") or hangs, and different kernels run '
       "at different speeds.")
FIX = "Install the same wheel on every host (pin it)"
LIMITS: tuple[str, ...] = ()

# (label in messages, attribute). Different builds of one version differ in commit, and
# mismatched NCCL between ranks is the classic cause of hangs and "Mismatched NCCL version".
# The loaded NCCL and cuDNN too: on 3.x the build-time NCCL is a constant of the wheel while
# the library that runs comes from the nvidia-nccl-cu* wheel, which may differ by host.
FIELDS = (("paddle", "version"), ("paddle commit", "commit"), ("CUDA", "cuda"),
          ("cuDNN", "cudnn"), ("NCCL", "nccl"), ("NCCL (loaded)", "nccl_runtime"),
          ("cuDNN (loaded)", "cudnn_runtime"))


def check(cluster: Cluster) -> Iterator[Finding]:
    stacks, missing = sections(cluster, lambda f: f.paddle, PaddleFacts)
    yield from could_not_check(NAME, "Paddle facts", missing)
    usable = {}
    for host, p in stacks.items():
        if p.available:
            usable[host] = p
        else:
            yield Finding(NAME, Status.FAIL, (host,),
                          f"{host}: Paddle not importable with {p.interpreter}: {p.reason}",
                          {"interpreter": p.interpreter, "reason": p.reason})
    if not usable:
        return
    bad: list[Finding] = []
    version_differs: set[str] = set()
    for label, attr in FIELDS:
        # Another version always has another commit: the commit is news only between hosts
        # that report the same version (two builds of one release).
        hosts = {h: p for h, p in usable.items()
                 if not (attr == "commit" and h in version_differs)}
        found = compare(NAME, label, {h: field_value(p, attr) for h, p in hosts.items()})
        if attr == "version":
            version_differs = {h for f in found for h in f.hosts}
        bad += found
    bad += compare(NAME, "Python", {h: python_minor(p) for h, p in usable.items()})
    yield from bad
    if not bad:
        p = next(iter(usable.values()))
        cuda = "CPU build" if not p.compiled_with_cuda else f"CUDA {p.cuda}, cuDNN {p.cudnn}"
        scope = (f"all {len(usable)}" if len(usable) == len(stacks)
                 else f"{len(usable)} of {len(stacks)}")
        yield passed(NAME, usable, f"paddle {p.version} ({cuda}, Python {python_minor(p)}) "
                     f"alike on {scope} hosts", version=p.version, commit=p.commit)
