"""GPU health: memory errors, pending retirement/remapping, slowdown reasons, busy GPUs, PCIe,
MIG, the NVSwitch fabric and Xid history."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.checks.common import could_not_check, passed, sections
from preflight.common.gpuclock import HW_SLOWDOWN_BITS, SW_SLOWDOWN_BITS
from preflight.common.gpumode import FABRIC_WARNINGS
from preflight.model.cluster import Cluster
from preflight.model.facts import GpuDevice, GpuFacts
from preflight.model.findings import Finding, Status

NAME = "gpu-health"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
No uncorrectable ECC errors since boot, no retired pages or remapped rows pending, no failed
row remapping, no hardware clock slowdown (HW slowdown, HW thermal slowdown, HW power brake:
fail; the software power cap and software thermal slowdown, which an idle power-capped GPU
reads too, warn), no compute process already on a GPU, PCIe link as wide as its maximum, every
GPU readable (one NVML cannot read, e.g. `GPU_IS_LOST` after an Xid 79, fails by itself while
the host's other GPUs are still read). MIG enabled fails (NCCL cannot span MIG instances;
pending at the next reset: warn). On NVSwitch systems (HGX), each GPU's fabric state
(`nvmlDeviceGetGpuFabricInfoV`, or the plain call on drivers without it): not started or still
in progress fails (Fabric Manager down: CUDA cannot start on the GPU), a completed registration
with an error status, an unhealthy route or a configuration error in the health mask fails,
degraded bandwidth and recoveries in progress warn; PCIe cards (NotSupported) have no fabric
and say nothing. Xid events of the kernel log since boot, by code: 48, 63, 64, 74, 79, 92, 94,
95, 119, 120 (ECC, row remapping, NVLink, fallen off the bus, GSP) fail, others warn; where the
log is not readable (`kernel.dmesg_restrict`, users other than root) the history is n/a with
that reason, blocking nothing (a could-not-check would make every unprivileged run NO-GO). The
same health comes from nvidia-smi where neither the probe's nor the training python has
nvidia-ml-py (`ecc.errors.uncorrected.volatile.total`, `retired_pages.pending`,
`remapped_rows.pending`/`.failure`, `clocks_event_reasons.active` or
`clocks_throttle_reasons.active` before r535, `--query-compute-apps`), in NVML's terms, so a
GPU is judged alike through either. Warns when the host reports no health (an nvidia-smi too
old for those fields).
"""
WHY = ("A GPU with memory errors, a pending retirement or a hardware slowdown runs slow or drops"
       " out mid-job (an Xid), and a GPU another process holds has neither the memory nor the "
       "time the job counts on: every other rank waits.")
FIX = "Reset or replace the GPU; fix cooling; stop the old job; reseat the card"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the hosts have NVIDIA GPUs"

# Xid codes since boot that mean the hardware is failing or was (NVIDIA's Xid catalogue):
# the GPU fell off the bus, double-bit ECC, row remapping failures, NVLink errors, contained
# and uncontained ECC, GSP errors. Other Xids (13, 31, 43: a program's own faults) warn.
XID_FAILS = {48: "double-bit ECC error", 63: "row remapping event", 64: "row remapping "
             "failure", 74: "NVLink error", 79: "GPU fell off the bus", 92: "high single-bit "
             "ECC rate", 94: "contained ECC error", 95: "uncontained ECC error",
             119: "GSP RPC timeout", 120: "GSP error"}
HEALTH_FIELDS = ("ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
                 "remapped_rows_failure", "clock_event_reasons", "processes", "fabric_state")


def _problems(d: GpuDevice) -> Iterator[tuple[Status, str]]:
    if d.error:
        yield Status.FAIL, (f"NVML cannot read it ({d.error}): a lost GPU (see the kernel "
                            "log for an Xid); drain the host, reset or replace the GPU")
        return
    if d.mig_mode and d.mig_mode.startswith("enabled"):
        # NCCL cannot span MIG instances, and CUDA then counts instances, not GPUs.
        yield Status.FAIL, ("MIG is enabled: NCCL cannot span MIG instances and CUDA counts "
                            "instances, not GPUs; disable it for distributed training "
                            "(nvidia-smi -i N -mig 0, then reset the GPU)")
    elif d.mig_mode and "pending enabled" in d.mig_mode:
        yield Status.WARN, "MIG becomes enabled at the next GPU reset"
    if d.ecc_uncorrected_volatile:
        yield Status.FAIL, (f"{d.ecc_uncorrected_volatile} uncorrectable ECC errors since boot "
                            "(drain the host, reset or replace the GPU)")
    if d.retired_pages_pending:
        yield Status.FAIL, "retired pages pending: the GPU needs a reset to retire them"
    if d.remapped_rows_failure:
        yield Status.FAIL, "row remapping failed: the GPU needs replacing"
    elif d.remapped_rows_pending:
        yield Status.FAIL, "row remapping pending: the GPU needs a reset"
    if d.clock_event_reasons:
        for status, bits in ((Status.FAIL, HW_SLOWDOWN_BITS), (Status.WARN, SW_SLOWDOWN_BITS)):
            slow = [text for bit, text in bits.items() if d.clock_event_reasons & bit]
            if slow:
                yield status, f"clocks slowed by {', '.join(slow)}"
    if d.fabric_state in ("not started", "in progress"):
        # CUDA init fails (cudaErrorSystemNotReady) until the GPU has joined the fabric.
        yield Status.FAIL, (f"NVSwitch fabric {d.fabric_state}: the GPU has not joined the "
                            "NVLink fabric (is nvidia-fabricmanager running, at the "
                            "driver's version?); CUDA cannot start on it until it has")
    for problem in d.fabric_problems:
        yield (Status.WARN if problem in FABRIC_WARNINGS else Status.FAIL,
               f"NVSwitch fabric: {problem} (see the Fabric Manager log)")
    if d.processes:
        yield Status.FAIL, f"already busy: {d.processes} compute process(es) running"
    if d.pcie_width and d.pcie_width_max and d.pcie_width < d.pcie_width_max:
        yield Status.FAIL, (f"PCIe link x{d.pcie_width} of x{d.pcie_width_max}: "
                            "reseat the GPU or check the riser")


def _xids(g: GpuFacts) -> Iterator[tuple[Status, str]]:
    """Xid events of the kernel log since boot, grouped by code; a log the user may not read
    is said, and blocks nothing (dmesg_restrict: every unprivileged run would be NO-GO)."""
    if g.xid_error:
        yield Status.SKIP, (f"Xid history not checked: {g.xid_error} (root, or "
                            "kernel.dmesg_restrict=0, reads it)")
        return
    by_code: dict[int, list[str]] = {}
    for pci, code, _ in g.xid or ():
        by_code.setdefault(code, []).append(pci)
    for code, where in sorted(by_code.items()):
        gpus = ", ".join(dict.fromkeys(where))
        if code in XID_FAILS:
            yield Status.FAIL, (f"Xid {code} ({XID_FAILS[code]}) {len(where)}x since boot on "
                                f"{gpus}: drain the host, reset or replace the GPU")
        else:
            yield Status.WARN, f"Xid {code} {len(where)}x since boot on {gpus}"


def check(cluster: Cluster) -> Iterator[Finding]:
    gpus, missing = sections(cluster, lambda f: f.gpu, GpuFacts)
    yield from could_not_check(NAME, "GPU facts", missing)
    healthy = []
    for host, g in gpus.items():
        if not g.devices:
            continue
        reported = any(getattr(d, f) is not None for d in g.devices
                       for f in (*HEALTH_FIELDS, "error"))
        if not reported:
            yield Finding(NAME, Status.WARN, (host,),
                          f"{host}: GPU health not reported by {g.source}; install "
                          "nvidia-ml-py for the probe's or the training python",
                          {"source": g.source})
        found = False
        for d in g.devices:
            for status, text in _problems(d):
                found = True
                yield Finding(NAME, status, (host,), f"{host}: GPU{d.index} ({d.name}): {text}",
                              {"gpu": d.index, "uuid": d.uuid})
        for status, text in _xids(g):
            found = found or status is not Status.SKIP
            yield Finding(NAME, status, (host,), f"{host}: {text}", {})
        if reported and not found:
            healthy.append(host)
    if healthy:
        yield passed(NAME, healthy, f"no memory errors, slowdowns, busy GPUs or degraded PCIe "
                     f"links on {len(healthy)} hosts")
