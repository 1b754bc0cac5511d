"""Every host was reached and probed; otherwise a could-not-check finding with its stage."""

from __future__ import annotations

from collections.abc import Iterator

from preflight.model.cluster import Cluster
from preflight.model.findings import Finding, Status

NAME = "reachable"


def check(cluster: Cluster) -> Iterator[Finding]:
    ok = [o.host.name for o in cluster.outcomes if o.ok]
    for o in cluster.outcomes:
        if o.failure is not None:
            yield Finding(NAME, Status.COULD_NOT_CHECK, (o.host.name,),
                          f"{o.host.name}: could not check ({o.failure.stage.value}): "
                          f"{o.failure.reason}",
                          {"stage": o.failure.stage.value, "reason": o.failure.reason,
                           "address": o.host.address})
    if ok:
        yield Finding(NAME, Status.PASS, tuple(ok),
                      f"{len(ok)} of {len(cluster.outcomes)} hosts reached and probed")
