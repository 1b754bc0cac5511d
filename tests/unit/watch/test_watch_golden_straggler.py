"""A real straggler's captured course judged again: the watch's log of a 3-host gloo job
(Paddle 3.3.1 on the simulated cluster, tests/cluster/test_watch.py with
PREFLIGHT_CAPTURE_WATCH) where good2's cgroup was given 0.1 core mid-run. Every sample of
every host, as the watch received them; the rules of today must name good2 as the
straggler for its quota, and nobody, ever, before the quota or besides good2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from preflight.config.errors import InputError
from preflight.model.findings import Status
from preflight.model.watch import blame_of
from preflight.watch.record import finding_doc
from preflight.watch.replay import judged_again

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "watch" / "straggler-quota-3.3.1.jsonl"


def _records() -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in LOG.read_text().splitlines()]


def test_the_captured_straggler_is_named_on_its_host_for_its_quota_and_nobody_else():
    capture = json.loads(LOG.read_text().splitlines()[0])
    judgements = judged_again(str(LOG))
    assert len(judgements) >= 10  # the whole course, an interval apart
    named = [(j.at, f) for j in judgements for f in j.findings if f.status is not Status.PASS]
    assert named, "the quota was never named"
    # Nobody before the quota; nobody but good2 after it.
    assert all(at > capture["planted"] for at, _ in named), named[0]
    assert {f.hosts for _, f in named} == {("good2",)}
    at, first = named[0]
    assert first.check == "straggler" and first.status is Status.FAIL
    assert "good2 rank 1 (worker) holds its 2 peers back" in first.message
    assert "its cgroup's CPU quota throttles it" in first.message
    assert "0.1 of 2 cores now: a cgroup quota set since; 2 at the check" in first.message
    # Whom it blames, typed, as act and the log read it: good2's rank, for its CPU.
    blame = blame_of(first)
    assert blame.cause == "cpu" and [(r.host, r.rank) for r in blame.ranks] == [("good2", 1)]
    doc = finding_doc(first)
    assert doc["cause"] == "cpu" and doc["ranks"][0]["host"] == "good2"
    assert "pairs" not in doc and "job" not in doc
    live = [r for r in _records() if r["type"] == "finding" and r["status"] == "fail"][0]
    assert [r["host"] for r in live["ranks"]] == ["good2"]
    # Named as the live watch named it: within an interval of its finding.
    interval = judgements[1].at - judgements[0].at
    assert abs(at - capture["found"]) <= interval + 0.01, (at, capture["found"])
    # A healthy stretch first, judged healthy: the job's pace said of all three hosts.
    before = [j for j in judgements if j.at < capture["planted"]]
    paced = [f for j in before for f in j.findings if f.check == "progress"]
    assert paced and all(f.status is Status.PASS for f in paced)
    assert paced[-1].hosts == ("good1", "good2", "good3")


def test_a_log_cut_by_a_kill_is_judged_as_far_as_it_got_and_a_non_log_is_named(tmp_path):
    lines = LOG.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[1:20]) + "\n" + lines[20][:50])  # a half line at the end
    judged = judged_again(str(cut))
    assert judged and all(f.status is Status.PASS for j in judged for f in j.findings)
    other = tmp_path / "other.jsonl"
    other.write_text(lines[3] + "\n")
    try:
        judged_again(str(other))
    except InputError as e:
        assert str(e).startswith(f"{other}: ") and "no start record" in str(e)
    else:
        raise AssertionError("a log with no start record was judged")


def test_a_start_record_of_another_version_is_read_by_the_fields_it_shares(tmp_path):
    # A newer watch's log may keep more of each host at the check; an older one less: the
    # judgement reads what it knows, and a record that is not one is named with its file.
    recs = _records()
    start = next(i for i, r in enumerate(recs) if r["type"] == "start")
    for at in recs[start]["at_check"].values():
        at["a_later_measure"] = 1.5
    newer = tmp_path / "newer.jsonl"
    newer.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    assert [[f.message for f in j.findings] for j in judged_again(str(newer))] == \
        [[f.message for f in j.findings] for j in judged_again(str(LOG))]
    recs[start]["at_check"]["good2"] = "2 cores"
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    try:
        judged_again(str(broken))
    except InputError as e:
        assert str(e).startswith(f"{broken}: ") and "at_check of good2" in str(e), str(e)
    else:
        raise AssertionError("a start record whose at_check is not a record was read")
