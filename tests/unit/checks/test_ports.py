"""The ports check: the launcher's ports are free."""

from __future__ import annotations

from dataclasses import replace

from support import cluster, messages

from preflight.checks import ports
from preflight.model import facts as F
from preflight.model.findings import Status
from preflight.model.policy import Policy


def test_ports_named_by_the_policy_must_be_free():
    c = cluster(a={"ports": F.PortsFacts((22, 6070, 6071))}, b={"ports": F.PortsFacts((22,))},
                c={"ports": F.SectionError("no /proc/net/tcp")})
    c = replace(c, policy=Policy(ports=(*range(6070, 6078), 6767)))
    fs = list(ports.check(c))
    assert messages(fs, Status.FAIL) == [
        "a: port 6070-6071 already in use (the launcher needs 6070-6077, 6767): stop the old "
        "job or choose other ports"]
    assert messages(fs, Status.COULD_NOT_CHECK) == [
        "c: could not read listening ports: no /proc/net/tcp"]
    assert [f.hosts for f in fs if f.status is Status.PASS] == [("b",)]


def test_paddle_default_ports_taken_only_warn():
    # Without ports in the policy the plan picks free ones; a launch by hand would clash.
    c = cluster(a={"ports": F.PortsFacts((22, 6767))}, b={"ports": F.PortsFacts((22,))})
    fs = list(ports.check(c))
    assert messages(fs, Status.FAIL) == []
    assert messages(fs, Status.WARN) == [
        "a: port 6767 already in use: a launch with Paddle's default ports (6070-6077, 6767) "
        "would clash; the plan's ports are free"]
