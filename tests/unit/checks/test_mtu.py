"""The mtu check: one MTU on the interfaces the job uses."""

from __future__ import annotations

from dataclasses import replace

from support import cluster, messages, net_facts

from preflight.checks import mtu
from preflight.model import facts as F
from preflight.model.findings import Status


def test_mtu():
    c = cluster(a={"network": net_facts(1500, "10.0.0.1")},
                b={"network": net_facts(1500, "10.0.0.2")},
                c={"network": net_facts(9000, "10.0.0.3")})
    c = replace(c, outcomes=tuple(replace(o, host=replace(o.host, address=f"10.0.0.{i}"))
                                  for i, o in enumerate(c.outcomes, 1)))
    fs = list(mtu.check(c))
    assert messages(fs, Status.FAIL) == ["c: MTU 9000 != 1500 (2 of 3 hosts) on c:eth0"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("a", "b")]


def test_mtu_uses_default_route_when_address_is_a_name():
    no_route = F.NetworkFacts((F.Interface("lo", 65536, None, None, ()),))
    fs = list(mtu.check(cluster(a={}, b={"network": no_route})))
    assert messages(fs, Status.COULD_NOT_CHECK)[0].startswith("b: no interface holds")
    assert any(f.status is Status.PASS and f.hosts == ("a",) for f in fs)
