"""The watch's results log stays bounded (--log-max-mb): every finding kept, samples thinned
as the log fills, what the replay needs kept whatever the stride, and the replay still reads
the ranks' rates right from the samples kept."""

from __future__ import annotations

import json

import pytest
from watchtools import POLICY, FakeRank, cluster

from preflight.model.findings import Finding, Status
from preflight.watch import page, replay
from preflight.watch.record import Record, stride
from preflight.watch.samples import HostStream


@pytest.mark.parametrize("written,every", [(0, 1), (499, 1), (500, 2), (749, 2), (750, 4),
                                           (875, 8), (999, 512), (1000, 0), (5000, 0)])
def test_the_stride_doubles_each_time_what_is_left_of_the_budget_halves(written, every):
    assert stride(written, 1000) == every


def test_no_budget_keeps_every_sample():
    assert stride(10 ** 12, 0) == 1


def fill(path, budget, intervals, named_from=None, gone_at=None):
    """A watch of 4 hosts writing to a log of `budget` bytes of samples for `intervals`
    samples a host, a finding each 10; node02 named by an open finding from named_from on;
    node03's rank exits at gone_at. Returns the Record (closed) and the findings written."""
    hosts = cluster(4)
    streams = {h.name: HostStream(h.name) for h in hosts}
    rec = Record(str(path), budget)
    rec.event("start", argv=["watch"], hosts=[h.name for h in hosts])
    said = []
    for i in range(intervals):
        if gone_at is not None and i == gone_at:
            r = hosts[2].ranks.pop()
            hosts[2].gone.append(r)
        for h in hosts:
            tick = streams[h.name].feed(h.line(POLICY.interval_s))
            rec.sample(h.name, tick.line, tick)
        if i % 10 == 0:
            f = Finding("straggler", Status.WARN, ("node01",), f"finding {i}")
            rec.findings("finding", [f])
            said.append(f.message)
        if named_from is not None and i >= named_from:
            rec.named = {"node02"}
    rec.event("end", code=0)
    rec.close()
    return rec, said


def records(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_the_samples_stay_within_the_budget_and_every_finding_is_kept(tmp_path):
    log = tmp_path / "watch.jsonl"
    one = len(cluster(1)[0].line()) + 80  # about a sample's line
    budget = 60 * one
    rec, said = fill(log, budget, 400)
    got = records(log)
    samples = [r for r in got if r["type"] == "sample"]
    size = sum(len(json.dumps(r)) for r in samples)
    assert size <= budget + (1 << 20) and rec.written <= budget + 4 * one
    assert len(samples) < 4 * 400 / 4  # thinned well below one a host an interval
    assert [r["message"] for r in got if r["type"] == "finding"] == said  # all 40
    thinned = [r["every"] for r in got if r["type"] == "thinned"]
    assert thinned[:3] == [2, 4, 8] and thinned[-1] is None  # past the budget: none
    # Every host's first sample is kept, before any thinning.
    firsts = [r["host"] for r in samples[:4]]
    assert firsts == ["node01", "node02", "node03", "node04"]


def test_the_rates_read_back_from_a_thinned_log_are_the_jobs(tmp_path):
    log = tmp_path / "watch.jsonl"
    one = len(cluster(1)[0].line()) + 80
    fill(log, 40 * one, 100)
    back = replay.read(str(log))
    assert back.thinned and back.thinned[0][1] == 2
    courses = back.ranks.values()
    assert len(courses) == 4
    for c in courses:
        rates = [p.rate for p in c.points("steps")]
        assert len(rates) >= 3 and all(r == pytest.approx(10.0, rel=0.02) for r in rates)
    assert "samples thinned from" in page.text(back)[0]


def test_a_named_host_keeps_its_samples_and_an_exit_is_kept_past_the_budget(tmp_path):
    log = tmp_path / "watch.jsonl"
    one = len(cluster(1)[0].line()) + 80
    fill(log, 80 * one, 200, named_from=10, gone_at=150)
    samples = [r for r in records(log) if r["type"] == "sample"]
    by_host = {h: [r for r in samples if r["host"] == h] for h in ("node01", "node02")}
    # Both thinned alike until node02 is named; then node02's kept whole until the budget
    # ran out, node01's one in 2, 4, ...
    assert len(by_host["node02"]) > 1.5 * len(by_host["node01"])
    gone = [r for r in samples if r["sample"]["gone"]]
    assert [r["host"] for r in gone] == ["node03"]  # its rank's exit, long past the budget
    back = replay.read(str(log))
    assert any(c.rid.host == "node03" for c in back.ranks.values())


def test_a_log_appended_to_counts_what_it_holds(tmp_path):
    log = tmp_path / "watch.jsonl"
    log.write_text("x" * 1000 + "\n")
    rec = Record(str(log), 1200)
    assert rec.written == 1001 and stride(rec.written, rec.budget) == 4
    rec.close()


def test_a_rank_first_seen_is_kept_whatever_the_stride(tmp_path):
    hosts = cluster(1)
    stream = HostStream("node01")
    rec = Record(str(tmp_path / "w.jsonl"), 0)
    rec.every = 8
    for _ in range(3):
        t = stream.feed(hosts[0].line())
        assert rec._keep("node01", t, 1, 8) == (t.n == 0)
    hosts[0].ranks.append(FakeRank(2000, 9))
    t = stream.feed(hosts[0].line())
    assert rec._keep("node01", t, 3, 8)  # a new rank's first sample
    rec.close()
