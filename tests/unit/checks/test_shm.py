"""The shm check: /dev/shm large enough for data loaders."""

from __future__ import annotations

import pytest
from support import MIB, cluster, messages

from preflight.checks import shm
from preflight.model import facts as F
from preflight.model.findings import Status


@pytest.mark.parametrize("mib,status", [(64, Status.FAIL), (768, Status.WARN), (8192, None)])
def test_shm(mib, status):
    fs = list(shm.check(cluster(a={"shm": F.ShmFacts(mib * MIB, mib * MIB)})))
    assert [f.status for f in fs if f.status is not Status.PASS] == ([status] if status else [])
    if status:
        assert fs[0].message.startswith(f"a: /dev/shm is {mib} MiB")


def test_shm_unreported():
    c = cluster(a={"shm": F.SectionError("x")})
    assert messages(shm.check(c), Status.COULD_NOT_CHECK) == ["a: could not read /dev/shm: x"]
