"""One full pair told apart by the sender's own qdisc: a shaper on its sending side (tc tbf, a
container's bandwidth limit) holds a standing queue there; a slow receiver's link, or the
switch between them, holds it beyond the sender, whose qdisc stays empty. Without that, the
link between the two stays said as either end's."""

from __future__ import annotations

from typing import Any

import pytest
from watchtools import cluster, named, watched

from preflight.act import recover
from preflight.model.findings import Status
from preflight.model.watch import blame_of

ADDRESSES = {f"10.0.0.{i + 1}": f"node{i + 1:02d}" for i in range(4)}


def _one_full_pair(shaped, other=None):
    """node02's queue to node03 fills at 20 s and the job slows with it; shaped: the bytes
    each host's qdisc on eth0 (the job's interface) holds from then on ({name: bytes}; None:
    qdiscs not said, an older sampler); other: on another interface of its, from the start.
    Returns the last findings and every judgement's."""
    hosts = cluster(3)
    for h in hosts:
        h.backlog = None if shaped is None else 0
        h.other_backlog = (other or {}).get(h.name, 0)

    def change(t):
        if t == 20:
            hosts[1].ranks[0].sendq = {"10.0.0.3": 300 << 10}
            for h in hosts:
                h.ranks[0].steps_per_s = 3.0
                if shaped is not None:
                    h.backlog = shaped.get(h.name, 0)

    every: list[Any] = []
    findings, _ = watched(hosts, 60, change=change, addresses=ADDRESSES, every=every)
    return findings, every


def test_a_sender_whose_own_shaper_holds_back_its_data_is_named_alone_never_its_receiver():
    findings, every = _one_full_pair({"node02": 48 << 10})
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]
    # First said with the shaper's figures, then kept while its pair stays full.
    first = next(f for judgement in every for f in judgement if f.status is Status.FAIL)
    assert first.hosts == ("node02",)
    assert first.message.startswith(
        "node02's link holds the job: data to or from it waits in full send queues "
        "(node02->node03 300 KiB) for 15 s"), first.message
    assert first.message.endswith(
        "; its own tbf qdisc on eth0 holds a standing queue (48 KiB, in 100% of its samples): "
        "node02's sending side is the narrowest point (a shaper: tc, a container's bandwidth "
        "limit; or its NIC), not node03"), \
        first.message
    assert "; in every full queue since " in findings[0].message, findings[0].message
    # The receiver is named at no judgement.
    assert not any("node03" in f.hosts for judgement in every for f in judgement
                   if f.status is not Status.PASS), every
    blame = blame_of(findings[0])
    assert blame.cause == "link" and blame.pairs == (("node02", "node03"),)
    # One host: --act leaves it out, and bandwidth measures it again before it returns.
    culprits, notes = recover.culprits(findings)
    assert list(culprits) == ["node02"] and culprits["node02"].check == "bandwidth", notes


@pytest.mark.parametrize("shaped", [None, {}, {"node03": 48 << 10},
                                    {"node01": 48 << 10, "node02": 48 << 10,
                                     "node03": 48 << 10}],
                         ids=["not-said", "no-shaper", "receivers-shaper", "every-hosts"])
def test_without_the_senders_own_shaper_one_full_pair_stays_either_ends(shaped):
    # No qdisc figures (an older sampler); no queue standing; a queue standing on the
    # receiver (what it sends, not what it is sent); one on every host (the job's own
    # shape, every pod on its bandwidth limit): nothing tells the two ends apart.
    findings, _ = _one_full_pair(shaped)
    assert named(findings) == [("straggler", Status.FAIL, ("node02", "node03"))]
    assert findings[0].message.startswith("the link from node02 to node03 holds the job")
    assert "either end's link, or the switch between them" in findings[0].message


def test_a_queue_standing_on_another_interface_of_the_sender_is_not_its_jobs():
    # node02 also hosts another tenant's container, whose veth is shaped and holds a
    # standing queue all along; the job's own interface (eth0, the sampler's "carriers") holds
    # none: what slows node02 -> node03 is not node02's sending side, and the receiver is
    # not cleared by it.
    findings, every = _one_full_pair({}, other={"node02": 64 << 10})
    assert named(findings) == [("straggler", Status.FAIL, ("node02", "node03"))]
    assert "either end's link, or the switch between them" in findings[0].message
    assert not any(f.hosts == ("node02",) for judgement in every for f in judgement
                   if f.status is not Status.PASS), every
