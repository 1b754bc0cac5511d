"""The interfaces the job will use negotiated the same speed: a port or cable that fell back
(100 to 25 Gb/s, 10 to 1 Gb/s) makes every collective wait on that host, and iperf3 alone may
not tell (a link at its NIC's line rate is not a slow path)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from preflight.checks.common import job_interfaces, passed
from preflight.common.units import hosts_text
from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status

NAME = "nic-speed"
# What docs/checks.md says of it (generated from these): what it judges, why that
# stalls a job, the fix, and the policy limits it reads.
ABOUT = r"""
The same interface negotiated the same speed everywhere (where the NIC reports one; veth and
many virtual NICs do not): below the cluster's median warns, below half fails. A port or cable
that fell back (100 to 25 Gb/s) makes every collective wait on that host.
"""
WHY = ("A port that negotiated down (100 to 25 Gb/s) carries every collective through its host "
       "at the lower speed.")
FIX = "Reseat or replace the cable or transceiver; check the switch port (`ethtool`)"
LIMITS: tuple[str, ...] = ()
# When it has something to judge (a run without it says so, rather than nothing).
APPLIES = "the job's interfaces report a link speed (virtual NICs do not)"
FAIL_BELOW = 0.5  # as cpu-cores: half the median's speed, the whole job at about half pace


def check(cluster: Cluster) -> Iterator[Finding]:
    ifaces, unread = job_interfaces(NAME, cluster)
    yield from unread
    speeds: dict[str, int] = {}
    used: dict[str, str] = {}
    for host, iface in ifaces.items():
        # Virtual NICs (veth, some VMs) report no speed: nothing to compare, not a fault.
        if iface is not None and iface.speed_mbps and iface.speed_mbps > 0:
            speeds[host], used[host] = iface.speed_mbps, iface.name
    if not speeds:
        return
    median = statistics.median(speeds.values())
    slow = []
    for host, mbps in speeds.items():
        if mbps < median:
            slow.append(host)
            ratio = mbps / median
            yield Finding(NAME, Status.FAIL if ratio < FAIL_BELOW else Status.WARN, (host,),
                          f"{host}: {used[host]} negotiated {mbps} Mb/s vs {median:g} Mb/s "
                          "(cluster median): check the cable, transceiver and switch port "
                          "(ethtool)", {"speed_mbps": mbps, "median_mbps": median,
                                        "interface": used[host]})
    fine = [h for h in speeds if h not in slow]
    if fine:
        yield passed(NAME, fine, f"{median:g} Mb/s negotiated on the job's interface of "
                     f"{hosts_text(fine)}", median_mbps=median)
