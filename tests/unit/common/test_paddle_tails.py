"""common/paddlelog.py's one table on the tails real Paddle ranks left as they ended
(tests/fixtures/paddle-tails/, captured by tests/fixtures/capture_paddle_tails.py with Paddle
2.6.2 and 3.3.1: two nodes of one gloo job, rank 1 ending by an exception of the job's own
code, by SIGKILL, or by SIGTERM, rank 0 waiting for it in an all-reduce), and on broken tails.
The watch and the all-reduce read them alike: the cause once, its victims as victims."""

from __future__ import annotations

import json
import pathlib

import pytest

from preflight.common import paddlelog as L
from preflight.common.remote import Done
from preflight.model.watch import RankId, WatchPolicy
from preflight.network import allreduce_log
from preflight.network.paddle_job import LOG
from preflight.watch.rules.exits import Exit, error_line_of, exit_causes

TAILS = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "paddle-tails"
VERSIONS = ("2.6.2", "3.3.1")


def tails(version: str, how: str) -> tuple[list[str], list[str]]:
    """(rank 0's log tail, rank 1's) of one case."""
    doc = json.loads((TAILS / f"paddle-{version}.json").read_text())
    ranks = doc["cases"][how]["ranks"]
    return ranks["0"]["log_tail"], ranks["1"]["log_tail"]


def exits(version: str, how: str) -> tuple[Exit, Exit]:
    waiting, ended = tails(version, how)
    return (Exit(11.0, RankId("node01", "worker", 0, 100, 99), tuple(waiting)),
            Exit(10.0, RankId("node02", "worker", 1, 200, 98), tuple(ended)))


@pytest.mark.parametrize("version", VERSIONS)
def test_an_exception_of_the_jobs_own_code_is_its_ranks_cause_and_the_waiting_peer_its_victim(
        version):
    waiting, ended = exits(version, "exception")
    assert ended.error == "ValueError: bad batch: expected 64 rows, got 63"
    assert L.APPLICATION_ERROR.match(ended.error)
    # The peer's end names gloo's wait for rank 1: a victim, never a second cause.
    assert waiting.error is not None and "TIMEOUT self_rank = 0 pair_rank = 1" in waiting.error
    assert L.LOST_PEER.search("\n".join(waiting.tail))
    assert L.GLOO_PEER.search(waiting.error) is not None
    causes, after = exit_causes([ended, waiting], WatchPolicy())
    assert causes == [ended] and after == [waiting]
    # The secret the script printed before it failed is hidden wherever a line is quoted.
    [secret] = [ln for ln in ended.tail if "HF_TOKEN" in ln]
    assert L.redact(secret) == "loading shard with HF_TOKEN=***"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rank_killed_without_a_word_is_the_cause_and_its_peer_the_victim(version):
    waiting, ended = exits(version, "killed")
    assert ended.error is None  # SIGKILL: Paddle writes nothing
    assert ended.tail[-1] == "step 1 loss 0.5"
    assert waiting.error is not None and L.LOST_PEER.search("\n".join(waiting.tail))
    causes, after = exit_causes([ended, waiting], WatchPolicy())
    assert causes == [ended] and after == [waiting]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_terminated_rank_says_it_was_stopped_by_a_signal_not_why(version):
    waiting, ended = tails(version, "terminated")
    text = "\n".join(ended)
    assert "FatalError: `Termination signal` is detected by the operating system." in ended
    assert L.STOPPED_BY_SIGNAL.search(text) and L.LOST_PEER.search(text)
    assert all(L.BANNER.search(ln) for ln in ended if "SignalInfo" in ln)
    assert error_line_of(ended) == ("FatalError: `Termination signal` is detected by the "
                                    "operating system.")
    assert not L.APPLICATION_ERROR.match(error_line_of(ended) or "")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_all_reduce_reads_the_same_tails_alike(version):
    # The same lines as a host command of the all-reduce prints them (LOG-prefixed).
    waiting, ended = tails(version, "exception")
    said = "\n".join(LOG + ln for ln in ended)
    why = allreduce_log.log_reason(Done(1, said, ""))
    assert why == "ValueError: bad batch: expected 64 rows, got 63"
    assert "hf_notarealtoken123" not in "\n".join(allreduce_log.log_lines(Done(1, said, "")))


@pytest.mark.parametrize("tail", [
    (),
    ("LAUNCH INFO 2026-11-27 21:31:15,989 Job: default, mode collective",),
    ("Traceback (most recent call last):", '  File "train.py", line 3'),  # cut mid-trace
    ("\x00\x01garbage\ufffd", "step 7 lo"),
], ids=["empty", "launcher-chatter", "cut-mid-traceback", "garbage"])
def test_broken_tails_read_without_a_crash_and_without_an_invented_cause(tail):
    error = error_line_of(tail)
    assert error is None or error.startswith("Traceback")
    assert not L.LOST_PEER.search("\n".join(tail))
    assert not any(L.APPLICATION_ERROR.match(ln) for ln in tail)


def test_a_collective_timeout_is_read_with_its_timeout():
    # Paddle 3.3.1's gloo process group, a rank whose peer was busy 35 s in a checkpoint.
    from preflight.common.paddlelog import COLLECTIVE_TIMEOUT
    line = ("  what():  [enforce fail at /paddle/third_party/gloo/gloo/transport/tcp/pair.cc:708]"
            " ex_ == nullptr. Timed out waiting 30000ms for recv operation to complete")
    m = COLLECTIVE_TIMEOUT.search(line)
    assert m is not None and m.group(1) == "30000"
    assert COLLECTIVE_TIMEOUT.search("Timed out waiting for the lock") is None
