"""The ib-ports check: on RDMA hosts some port is ACTIVE, at the rate most hosts have."""

from __future__ import annotations

from typing import Optional

from support import cluster, messages, net_facts

from preflight.checks import ib_ports
from preflight.model import facts as F
from preflight.model.findings import Status


def ports(*spec: tuple[str, Optional[float]]) -> F.NetworkFacts:
    return F.NetworkFacts(net_facts().interfaces, "eth0", tuple(f"mlx5_{i}" for i in
                                                                range(len(spec))),
                          ib_ports=tuple(F.IbPort(f"mlx5_{i}", 1, state, rate, "InfiniBand")
                                         for i, (state, rate) in enumerate(spec)))


HDR = ("ACTIVE", 200.0)


def test_hosts_with_active_ports_at_one_rate_pass():
    c = cluster(a={"network": ports(HDR, HDR)}, b={"network": ports(HDR, HDR)})
    found = list(ib_ports.check(c))
    assert [(f.status, f.hosts) for f in found] == [(Status.PASS, ("a", "b"))]


def test_no_active_port_fails_a_rail_down_warns_a_slower_rate_fails():
    c = cluster(a={"network": ports(HDR, HDR)}, b={"network": ports(HDR, ("DOWN", 10.0))},
                c={"network": ports(("DOWN", None), ("INIT", None))},
                d={"network": ports(HDR, HDR)}, e={"network": ports(("ACTIVE", 100.0))})
    found = list(ib_ports.check(c))
    assert messages(found, Status.FAIL) == [
        "c: no InfiniBand/RoCE port is ACTIVE (mlx5_0/1 DOWN, mlx5_1/1 INIT): NCCL falls back "
        "to TCP sockets; check cables, the subnet manager (opensm) and the switch port",
        "e: InfiniBand rate (Gb/s) 100.0 != 200.0 (3 of 4 hosts)"]
    assert messages(found, Status.WARN) == [
        "b: mlx5_1/1 DOWN while 1 other port(s) are ACTIVE: a rail down"]


def test_hosts_without_rdma_say_nothing():
    assert list(ib_ports.check(cluster(a={}, b={}))) == []
