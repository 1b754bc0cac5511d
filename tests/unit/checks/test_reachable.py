"""The reachable check: every host reached and probed, else could-not-check with its stage."""

from __future__ import annotations

from collections.abc import Iterable

from support import REFUSED, cluster, same

from preflight.checks import reachable
from preflight.model.findings import Finding, Status


def statuses(findings: Iterable[Finding]) -> list[tuple[str, tuple[str, ...]]]:
    return sorted((f.status.value, f.hosts) for f in findings)


def test_reachable_all():
    fs = list(reachable.check(cluster(**same(3))))
    assert statuses(fs) == [("pass", ("node01", "node02", "node03"))]


def test_unreachable_host_is_could_not_check_with_stage():
    fs = list(reachable.check(cluster(node01={}, node02=REFUSED)))
    cnc = [f for f in fs if f.status is Status.COULD_NOT_CHECK]
    assert len(cnc) == 1 and cnc[0].hosts == ("node02",)
    assert cnc[0].message == ("node02: could not check (connect): connection refused at "
                              "10.0.0.9:22 (is sshd running?)")
    assert cnc[0].data["stage"] == "connect"
