"""The nofile check: the open-files limit."""

from __future__ import annotations

import pytest
from support import cluster, messages

from preflight.checks import nofile
from preflight.model import facts as F
from preflight.model.findings import Status


@pytest.mark.parametrize("soft,status", [(1024, Status.FAIL), (8192, Status.WARN),
                                         (65536, None), (None, None)])
def test_nofile(soft, status):
    lim = F.LimitsFacts(F.Limit(soft, soft), F.Limit(None, None))
    fs = list(nofile.check(cluster(a={"limits": lim})))
    assert [f.status for f in fs if f.status is not Status.PASS] == ([status] if status else [])


def test_limits_unreported():
    c = cluster(a={"limits": F.SectionError("y")})
    assert messages(nofile.check(c), Status.COULD_NOT_CHECK) == ["a: could not read limits: y"]
