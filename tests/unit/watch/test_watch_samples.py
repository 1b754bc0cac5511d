"""Sampler lines read into types: who a rank is, what is said once, what is not a sample."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest
from watchtools import FakeHost, FakeRank

from preflight.model.watch import RankSample
from preflight.watch.samples import SAMPLE_FIELDS, BadSample, HostStream, identity, job_key

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "watch"


@pytest.mark.parametrize("who,log,role,rank", [
    ({"PADDLE_TRAINER_ID": "3"}, "/l/workerlog.3", "worker", 3),
    ({"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": "1"}, None, "trainer", 1),
    ({"TRAINING_ROLE": "PSERVER", "PADDLE_PORT": "6070"}, "/l/serverlog.1", "server", 1),
    ({"TRAINING_ROLE": "PSERVER", "PADDLE_PSERVER_ID": "0"}, None, "server", 0),
    ({"TRAINING_ROLE": "PSERVER"}, "pipe:[123]", "server", None),
    ({"PADDLE_TRAINER_ID": "x"}, None, "worker", None),
], ids=["collective", "ps-trainer", "server-by-log", "server-by-id", "server-unknown",
        "garbage-id"])
def test_a_rank_is_known_by_paddles_variables(who, log, role, rank):
    rid = identity("h", 10, 1, who, log)
    assert (rid.role, rid.rank) == (role, rank)


@pytest.mark.parametrize("argv,key", [
    (("python", "-m", "paddle.distributed.launch", "--master", "1.2.3.4:6767", "t.py"),
     "master 1.2.3.4:6767"),
    (("python", "-m", "paddle.distributed.launch", "--servers=a:1,b:2", "t.py"),
     "servers a:1,b:2"),
    (("python", "-m", "paddle.distributed.launch", "--ips=10.0.0.1,10.0.0.2", "t.py"),
     "ips 10.0.0.1,10.0.0.2"),
    # No master: a job of one node, its launcher's own, whatever --job_id it carries.
    (("python", "-m", "paddle.distributed.launch", "--job_id", "j7", "t.py"),
     "launcher n1:42 (job_id j7)"),
    (("python", "-m", "paddle.distributed.launch", "t.py"), "launcher n1:42"),
    (("python", "-m", "paddle.distributed.launch", "--job_id=default", "t.py"),
     "launcher n1:42"),
])
def test_the_launchers_of_one_job_share_its_key(argv, key):
    assert job_key(argv, "n1", 42) == key


def test_two_launchers_without_a_master_are_two_jobs_on_one_host_or_two():
    argv = ("python", "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "t.py")
    keys = {job_key(argv, "n1", 42), job_key(argv, "n1", 43), job_key(argv, "n2", 42)}
    assert len(keys) == 3


def test_who_and_the_launcher_are_said_once_and_kept():
    host = FakeHost("n1", [FakeRank(11, 0), FakeRank(12, 1)])
    stream = HostStream("n1")
    first = stream.feed(host.line())
    later = stream.feed(host.line())
    assert [la.job for la in first.launchers] == ["master 10.0.0.1:6767"]
    assert later.launchers == ()
    assert [(r.rank, r.pid) for r, _ in later.ranks] == [(0, 11), (1, 12)]
    assert later.ranks[0][1].log_steps == 50 and later.ranks[0][1].t == 1005.0


@pytest.mark.parametrize("line", ["", "garbage", "[1, 2]", '{"v": 99}', "{\"v\": 1"])
def test_what_is_not_a_sample_is_refused(line):
    with pytest.raises(BadSample):
        HostStream("n1").feed(line)


def test_broken_parts_of_a_sample_are_errors_not_crashes():
    line = json.dumps({"v": 1, "n": 0, "t": 5.0, "host": {"error": "OSError: x"},
                       "jobs": [{"pid": 3, "argv": ["python", "-m",
                                                    "paddle.distributed.launch"],
                                 "ranks": [{"pid": 4, "error": "ProcessLookupError: gone"},
                                           "junk", {"pid": "x"}]}, 7], "gone": [9]})
    tick = HostStream("n1").feed(line)
    assert tick.error == "OSError: x"
    ((rid, s),) = tick.ranks
    assert rid.pid == 4 and s.state == "?" and s.error == "ProcessLookupError: gone"


def test_a_captured_sample_reads_whole():
    # Lines the real sampler printed on the simulated cluster (Paddle 3.3.1, gloo).
    lines = (FIXTURES / "collective-3.3.1.jsonl").read_text().splitlines()
    stream = HostStream("good1")
    ticks = [stream.feed(ln) for ln in lines]
    assert ticks[0].launchers and ticks[0].launchers[0].job.startswith("master ")
    ranks = [r for t in ticks for r in t.ranks]
    assert ranks and all(rid.role == "worker" and rid.rank is not None for rid, _ in ranks)
    assert (ranks[-1][1].log_steps or 0) > (ranks[0][1].log_steps or 0)
    assert ticks[-1].sample.nics and ticks[-1].netns


def test_a_rank_read_has_every_field_of_a_sample_equal_to_one_made_by_its_class():
    # A rank's sample is made without the dataclass's __init__ (watch/samples.py): a field
    # added to RankSample and not read would be missing, not its default.
    lines = (FIXTURES / "collective-3.3.1.jsonl").read_text().splitlines()
    stream = HostStream("good1")
    for line in lines[:3]:
        for _, s in stream.feed(line).ranks:
            assert set(vars(s)) == SAMPLE_FIELDS == {f.name for f in dataclasses.fields(s)}
            assert s == RankSample(**vars(s))
            with pytest.raises(dataclasses.FrozenInstanceError):
                s.t = 0.0  # type: ignore[misc]


BROKEN = json.loads((FIXTURES / "broken-lines.json").read_text())


@pytest.mark.parametrize("case", BROKEN["cases"], ids=lambda c: c["case"])
def test_a_broken_line_is_a_bad_sample_and_the_stream_reads_on_as_if_it_never_came(case):
    stream, clean = HostStream("good1"), HostStream("good1")
    first, _ = stream.feed(BROKEN["before"]), clean.feed(BROKEN["before"])
    assert first.launchers and first.ranks
    with pytest.raises(BadSample):
        stream.feed(case["line"])
    after, expected = stream.feed(BROKEN["after"]), clean.feed(BROKEN["after"])
    assert after == expected


def test_secrets_a_job_quotes_are_hidden_in_its_ticks_and_in_the_line_a_log_keeps():
    # A real sample whose rank printed a secret, whose launcher was given one on its command
    # line, and whose gone rank's tail holds one.
    lines = (FIXTURES / "collective-3.3.1.jsonl").read_text().splitlines()
    stream = HostStream("good1")
    stream.feed(lines[0])
    doc = json.loads(lines[1])
    job = doc["jobs"][0]
    job["argv"] = [*json.loads(lines[0])["jobs"][0]["argv"], "--api_key=sk-live-123"]
    rank = job["ranks"][0]
    rank["log"]["last"] = "step 7 HF_TOKEN=hf_abcdef loss 0.1"
    doc["gone"] = [{"pid": rank["pid"], "tail": ["Traceback", "KeyError: DB_PASSWORD=hunter2"]}]
    tick = stream.feed(json.dumps(doc))
    said = json.dumps([tick.line, [s.log_last for _, s in tick.ranks],
                       [tail for _, tail in tick.gone]])
    for secret in ("sk-live-123", "hf_abcdef", "hunter2"):
        assert secret not in said
    assert "HF_TOKEN=***" in said and "DB_PASSWORD=***" in said
    assert "api_key=***" in tick.line
    # A line with nothing to hide is kept as it came.
    clean = HostStream("good1")
    assert clean.feed(lines[0]).line == lines[0]
