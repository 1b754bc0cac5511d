"""Version pins from the policy (e.g. paddle>=2.6,<3, driver>=535) hold on every host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from preflight.checks.common import passed
from preflight.model.cluster import Cluster
from preflight.model.facts import GpuFacts, HostFacts, PaddleFacts, not_requested
from preflight.model.findings import Finding, Status

NAME = "pins"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
Every `--require`/`require:` pin holds on every host; a host without the pinned thing (no GPU
for a driver pin) cannot be checked.
"""
WHY = ("The pins say what the job was validated with; a host outside them runs a stack nobody "
       "tested.")
FIX = "Install the pinned versions"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "versions are pinned (--require, or require: in the policy)"


def nccl_version(code: str) -> Optional[str]:
    """Returns '2.25.1' for Paddle's NCCL code '22501' ('2804' -> '2.8.4'); None for '0'.
    cuDNN's codes are the same scheme ('8906' -> '8.9.6', '90501' -> '9.5.1')."""
    try:
        v = int(code)
    except ValueError:
        return code if _is_version(code) else None
    if v <= 0:
        return None
    major, rest = (v // 10000, v % 10000) if v >= 10000 else (v // 1000, v % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def pinned_value(name: str, facts: HostFacts) -> Optional[str]:
    """Returns the host's version of what a pin names, or None if the host has none."""
    p, g = facts.paddle, facts.gpu
    paddle = p if isinstance(p, PaddleFacts) and p.available else None
    if name == "driver":
        return g.driver if isinstance(g, GpuFacts) and g.devices else None
    if paddle is None:
        return None
    if name in ("cuda", "cudnn") and paddle.compiled_with_cuda is False:
        return None
    # The library that runs, where the probe could tell it, else the one Paddle was built with.
    if name == "nccl":
        code = paddle.nccl_runtime or paddle.nccl
        return nccl_version(code) if code else None
    if name == "cudnn" and paddle.cudnn_runtime:
        return nccl_version(paddle.cudnn_runtime)
    return {"paddle": paddle.version, "cuda": paddle.cuda, "cudnn": paddle.cudnn,
            "python": paddle.python}.get(name)


def check(cluster: Cluster) -> Iterator[Finding]:
    for pin in cluster.policy.pins:
        spec = SpecifierSet(pin.spec)
        ok = []
        for host, facts in cluster.probed():
            value = pinned_value(pin.name, facts)
            if value is None and pin.name != "driver" and not_requested(facts.paddle):
                yield Finding(NAME, Status.SKIP, (host,), f"{host}: {pin} not requested "
                              "(--no-paddle)", {"pin": str(pin)})
                continue
            if value is None:
                yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                              f"{host}: no {pin.name} version to hold to {pin}",
                              {"pin": str(pin)})
                continue
            try:
                Version(value)
            except InvalidVersion:
                yield Finding(NAME, Status.COULD_NOT_CHECK, (host,),
                              f"{host}: {pin.name} {value!r} is not a version", {"pin": str(pin)})
                continue
            if spec.contains(value, prereleases=True):  # pins judge hosts: pre-releases count
                ok.append(host)
            else:
                yield Finding(NAME, Status.FAIL, (host,),
                              f"{host}: {pin.name} {value} does not satisfy {pin}",
                              {"pin": str(pin), "value": value})
        if ok:
            yield passed(NAME, ok, f"{pin} holds on {len(ok)} hosts", pin=str(pin))
