"""The nic-speed check: one negotiated speed on the interfaces the job uses."""

from __future__ import annotations

from support import cluster, messages, net_facts

from preflight.checks import nic_speed
from preflight.model.findings import Status


def speeds(*mbps):
    return cluster(**{f"node0{i}": {"network": net_facts(speed_mbps=s)}
                      for i, s in enumerate(mbps, 1)})


def test_a_port_that_fell_back_is_named_with_both_speeds():
    fs = list(nic_speed.check(speeds(100000, 100000, 25000, 100000, 50000)))
    assert messages(fs, Status.FAIL) == [
        "node03: eth0 negotiated 25000 Mb/s vs 100000 Mb/s (cluster median): check the cable, "
        "transceiver and switch port (ethtool)"]
    assert messages(fs, Status.WARN) == [
        "node05: eth0 negotiated 50000 Mb/s vs 100000 Mb/s (cluster median): check the cable, "
        "transceiver and switch port (ethtool)"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("node01", "node02", "node04")]


def test_nics_without_a_speed_are_not_judged():
    # veth and many virtual NICs report none: nothing to compare, and not a fault.
    assert list(nic_speed.check(speeds(None, None, None))) == []
    fs = list(nic_speed.check(speeds(10000, None, 10000)))
    assert [(f.status, f.hosts) for f in fs] == [(Status.PASS, ("node01", "node03"))]
