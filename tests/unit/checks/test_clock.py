"""The clock check: host clocks within the policy's bounds of the controller."""

from __future__ import annotations

import pytest
from support import cluster, messages

from preflight.checks import clock
from preflight.model import facts as F
from preflight.model.findings import Status


@pytest.mark.parametrize("skew,status", [(0.3, None), (2.0, Status.WARN), (30.0, Status.FAIL),
                                         (-30.0, Status.FAIL)])
def test_clock(skew, status):
    hosts = {f"n{i}": {"clock": F.ClockFacts(0.0, 0.01 * i)} for i in range(4)}
    hosts["odd"] = {"clock": F.ClockFacts(0.0, skew)}
    fs = list(clock.check(cluster(**hosts)))
    bad = [f for f in fs if f.status is not Status.PASS]
    if status is None:
        assert bad == []
    else:
        assert [(f.status, f.hosts) for f in bad] == [(status, ("odd",))]
        word = "ahead of" if skew > 0 else "behind"
        assert f"odd: clock {abs(skew) - 0.02:.1f} s {word} the cluster median" in bad[0].message


def test_clock_unreported():
    fs = list(clock.check(cluster(a={}, b={"clock": F.SectionError("missing")})))
    assert messages(fs, Status.COULD_NOT_CHECK) == ["b: could not read the clock: missing"]
