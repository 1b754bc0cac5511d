"""The tmp check: free space in the temp directory."""

from __future__ import annotations

import pytest
from support import MIB, cluster

from preflight.checks import tmp
from preflight.model import facts as F
from preflight.model.findings import Status


@pytest.mark.parametrize("free_mib,status", [(0, Status.FAIL), (63, Status.FAIL),
                                             (512, Status.WARN), (4096, None)])
def test_tmp_free_space(free_mib, status):
    facts = F.TmpFacts("/tmp", 8192 * MIB, free_mib * MIB)
    fs = list(tmp.check(cluster(a={"tmp": facts}, b={})))
    bad = [f for f in fs if f.status is not Status.PASS]
    assert [(f.status, f.hosts) for f in bad] == ([(status, ("a",))] if status else [])
    if status:
        assert bad[0].message.startswith(f"a: /tmp has {free_mib} MiB free")


def test_tmp_not_reported_cannot_pass():
    fs = list(tmp.check(cluster(a={"tmp": None}, b={})))
    assert [(f.status, f.hosts) for f in fs] == [(Status.COULD_NOT_CHECK, ("a",)),
                                                 (Status.PASS, ("b",))]
