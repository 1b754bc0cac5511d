"""The Paddle build fits the host: driver new enough for its CUDA, GPU architectures covered,
a CUDA build where there are GPUs, and the parameter-server core where the job needs it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Optional

from packaging.version import InvalidVersion, Version

from preflight.checks.common import passed
from preflight.checks.compat_table import MVC_FLOOR, TOOLKIT_DRIVER, WHEEL_ARCHS
from preflight.model.cluster import Cluster
from preflight.model.facts import GpuFacts, PaddleFacts
from preflight.model.findings import Finding, Status

NAME = "stack-compat"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
The driver is new enough for Paddle's CUDA (below NVIDIA's minor-version-compatibility floor:
fail; below the toolkit's own driver: warn, PTX JIT may fail); each GPU's compute capability
has a cubin in `paddle.version.cuda_archs()` (same major, minor not above the device's; else
warn), or, for 2.6 which has no such call, in what preflight knows of the wheel (the PyPI
`paddlepaddle-gpu` 2.6.x for CUDA 11.8: sm_61/70/75/80/86 and no PTX, so on H100/H200 it fails:
no kernel can run); no CPU build of Paddle on a GPU host; Paddle sees the GPUs the driver
lists, and a tiny op (allocate, compute, bring back) runs on each (the probe's Paddle child
does it: "no kernel image is available", a CUDA that cannot start or a Fabric Manager that is
down fails here, naming the GPU, not in the job); in `--mode ps` the build carries the PS core
(3.1+ CPU wheels do not) and its protobuf is older than 7 (7 removed what Paddle's
`DistributedStrategy` reads: the PS job dies at its start with a misleading TypeError).
Data: `checks/compat_table.py`, with sources.
"""
WHY = ('A build that does not fit its host fails at its first kernel ("no kernel image is '
       'available", a driver too old for the CUDA runtime) on that host, after the others have '
       "started and wait for it.")
FIX = ("Upgrade the driver or install a Paddle built for an older CUDA; install a build for the "
       "GPU; install 2.6.2 or 3.0.0 for PS mode, with protobuf<7")
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "Paddle imports on the hosts (not --no-paddle)"


# The first protobuf major a PS job of Paddle's fleet cannot start with (seen with 2.6.2:
# 5.29 and 6.33 run it, 7.36 fails).
PROTOBUF_BREAKS_PS = 7


def _protobuf_major(text: Optional[str]) -> int:
    v = _version(text)
    return v.major if v is not None else 0


def _version(text: Optional[str]) -> Optional[Version]:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def driver_findings(cuda: str, driver: str) -> Iterator[tuple[Status, str]]:
    """(status, text) when the driver is too old for a CUDA build (nothing when it fits)."""
    cv, dv = _version(cuda), _version(driver)
    if cv is None or dv is None:
        yield Status.COULD_NOT_CHECK, f"cannot compare driver {driver!r} with CUDA {cuda!r}"
        return
    key = f"{cv.major}.{cv.minor}"
    floor = MVC_FLOOR.get(cv.major) or TOOLKIT_DRIVER.get(key)
    if floor is None:
        yield Status.WARN, f"CUDA {cuda} is not in preflight's driver table; driver not judged"
        return
    if dv < Version(floor):
        yield Status.FAIL, (f"driver {driver} is too old for Paddle's CUDA {cuda} (needs >= "
                            f"{floor}); upgrade the driver or install a build for older CUDA")
        return
    full = TOOLKIT_DRIVER.get(key)
    if full and dv < Version(full):
        yield Status.WARN, (f"driver {driver} runs CUDA {cuda} only through minor-version "
                            f"compatibility (full support from {full}): PTX JIT may fail")


def _minor(text: Optional[str]) -> str:
    v = _version(text)
    return f"{v.major}.{v.minor}" if v is not None else ""


def arch_findings(p: PaddleFacts, g: GpuFacts) -> Iterator[tuple[Status, str]]:
    """Each GPU's compute capability needs a cubin of the same major, minor <= the device's.
    Archs come from Paddle (3.1+), else from what preflight knows of the wheel (2.6)."""
    ccs = sorted({d.compute_capability for d in g.devices if d.compute_capability})
    if not ccs:
        return
    archs, ptx, known = p.cuda_archs, True, ""
    if not archs:
        wheel = WHEEL_ARCHS.get((_minor(p.version), _minor(p.cuda)))
        if wheel is None:
            yield Status.WARN, (f"Paddle {p.version} does not report cuda_archs: coverage of "
                                f"compute capability {', '.join(ccs)} not verified")
            return
        (archs, ptx), known = wheel, f"the Paddle {p.version} wheel for CUDA {p.cuda} "
    if not ptx:  # no PTX to JIT from: an uncovered GPU runs no kernel at all
        for cc in ccs:
            if not _covered(cc, archs):
                yield Status.FAIL, (f"compute capability {cc} is not among the "
                                    f"architectures {known}carries ({_sm(archs)}) and it has "
                                    "no PTX: every kernel fails (\"no kernel image is "
                                    "available\"); install a CUDA 12 build for this GPU")
        return
    for cc in ccs:
        if not _covered(cc, archs):
            yield Status.WARN, (f"compute capability {cc} is not covered by Paddle's "
                                f"cuda_archs {list(archs)}: only PTX JIT can run it "
                                "(slow start, or failure); use a build for this GPU")


# What a failed tiny op says, and what to do about it.
OP_HINTS = (("no kernel image", "the build lacks this GPU's architecture: install a build "
             "for it"),
            ("fabric", "the NVSwitch fabric is not up: start nvidia-fabricmanager"),
            ("out of memory", "the GPU's memory is taken: stop what holds it"),
            ("cudaerrorinitializationerror", "CUDA cannot initialise: check the driver and "
             "the device nodes"))


def compute_findings(p: PaddleFacts, g: GpuFacts) -> Iterator[tuple[Status, str]]:
    """What Paddle itself could do on the GPUs NVML lists: see them, and run a tiny op."""
    if not p.compiled_with_cuda or p.gpu_visible is None:
        return  # a CPU build is said below; an older probe did not try
    if p.gpu_visible == 0:
        why = f" ({p.gpu_error})" if p.gpu_error else ""
        yield Status.FAIL, (f"Paddle sees no GPU of the {len(g.devices)} the driver lists"
                            f"{why}: a container without the GPUs' compute capability, an "
                            "empty CUDA_VISIBLE_DEVICES, or a CUDA that cannot start")
        return
    for index, error in p.gpu_ops or ():
        if error:
            hint = next((h for k, h in OP_HINTS if k in error.lower()), "")
            yield Status.FAIL, (f"GPU{index}: Paddle cannot compute on it: {error}"
                                + (f" ({hint})" if hint else ""))


def _covered(cc: str, archs: Sequence[int]) -> bool:
    """A cubin of the same major and a minor <= the device's (an unreadable cc: assumed)."""
    try:
        major, minor = (int(x) for x in cc.split(".")[:2])
    except ValueError:
        return True
    return any(a // 10 == major and a % 10 <= minor for a in archs)


def _sm(archs: Sequence[int]) -> str:
    return "/".join(f"sm_{a}" for a in archs)


def check(cluster: Cluster) -> Iterator[Finding]:
    ok_hosts = []
    for name, facts in cluster.probed():
        p, g = facts.paddle, facts.gpu
        if not isinstance(p, PaddleFacts) or not p.available:
            continue  # paddle-stack reports it
        problems: list[tuple[Status, str]] = []
        if cluster.policy.mode == "ps":
            if p.ps_core is False:
                problems.append((Status.FAIL, (
                    f"Paddle {p.version} lacks the parameter-server core (CommContext, "
                    "DistCommunicator, DistFleetWrapper): PS mode cannot run; 3.1+ CPU wheels "
                    "drop it, 2.6.2 and 3.0.0 carry it")))
            elif p.ps_core is None:
                problems.append((Status.COULD_NOT_CHECK,
                                 "could not tell whether Paddle carries the PS core"))
            elif _protobuf_major(p.protobuf) >= PROTOBUF_BREAKS_PS:
                problems.append((Status.FAIL, (
                    f"protobuf {p.protobuf} beside Paddle {p.version}: protobuf "
                    f"{PROTOBUF_BREAKS_PS} removed FieldDescriptor.label, which Paddle's "
                    "DistributedStrategy reads, so a PS job dies setting a_sync with a "
                    "misleading \"TypeError: a_sync_configs is not a attribute of "
                    f"DistributedStrategy\"; install protobuf<{PROTOBUF_BREAKS_PS} there")))
        if isinstance(g, GpuFacts) and g.devices:
            problems.extend(compute_findings(p, g))
            if p.compiled_with_cuda is False:
                problems.append((Status.FAIL, (
                    f"a CPU build of Paddle ({p.version}) on a host with {len(g.devices)} "
                    "GPUs: install paddlepaddle-gpu")))
            elif p.cuda and p.cuda not in ("False", "0"):
                if g.driver:
                    problems.extend(driver_findings(p.cuda, g.driver))
                problems.extend(arch_findings(p, g))
        for status, text in problems:
            yield Finding(NAME, status, (name,), f"{name}: {text}", {"paddle": p.version})
        if not problems:
            ok_hosts.append(name)
    if ok_hosts:
        yield passed(NAME, ok_hosts, f"Paddle build fits driver, GPUs and {cluster.policy.mode} "
                     f"mode on {len(ok_hosts)} hosts")
