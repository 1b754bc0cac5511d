"""What the model derives from one host's facts: the job's interface, gloo's interface."""

from __future__ import annotations

from dataclasses import replace

from support import host_facts, net_facts

from preflight.model import facts as F


def test_job_interface_holds_the_address_else_the_default_route():
    net = net_facts(9000, "10.0.0.7", "ib0")
    assert net.job_interface("10.0.0.7").name == "ib0"  # type: ignore[union-attr]
    assert net.job_interface("127.0.0.1").name == "lo"  # type: ignore[union-attr]
    # A DNS name or a NAT address is on no interface: the default route's is the guess.
    assert net.job_interface("node07.example").name == "ib0"  # type: ignore[union-attr]
    assert replace(net, default_route=None).job_interface("node07.example") is None


def test_gloo_is_told_the_interface_that_holds_the_address():
    facts = host_facts(network=net_facts(1500, "10.0.0.7", "eth1"))
    assert facts.gloo_interface("10.0.0.7") == "eth1"
    assert facts.gloo_interface("10.9.9.9") is None  # not ours: gloo binds by hostname


def test_gloo_interface_set_by_the_host_itself_is_left_alone():
    env = F.EnvFacts((("GLOO_SOCKET_IFNAME", "bond0"),))
    facts = host_facts(network=net_facts(1500, "10.0.0.7", "eth1"), env=env)
    assert facts.gloo_interface("10.0.0.7") is None
    broken = host_facts(network=F.SectionError("no rtnetlink"))
    assert broken.gloo_interface("10.0.0.7") is None
