"""An all-reduce's outcome from what each host printed: the culprit, hung ranks, rank 0's results,
the log line that says why (secrets redacted)."""

from __future__ import annotations

import pytest

from preflight.collect.remote import Done
from preflight.network import allreduce as AR
from preflight.testing.local import LocalRemote


def test_log_reason_quotes_the_error_line_and_redacts_secrets():
    out = "\n".join(AR.LOG + ln for ln in [
        "LAUNCH INFO 2026 job started", "I1121 tcp_utils.cc:132] connected",
        "Traceback (most recent call last):", "  File x.py, line 4",
        "RuntimeError: connect refused with API_TOKEN=abc123 set"])
    why = AR.log_reason(Done(1, out, ""))
    assert why == "RuntimeError: connect refused with API_TOKEN=*** set"


def test_first_failing_rank_is_the_culprit_and_the_rest_were_stopped():
    members = [AR.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in "abc"]
    results = {"b": Done(1, AR.LOG + "RuntimeError: Unable to find address for: nope0", ""),
               "a": Done(-15, "", ""), "c": Done(-15, "", "")}
    r = AR._summarise(members, "gloo", 3, ("a", "b", "c"), results, ["b"],
                      AR.AllReduceOptions(), 1.0)
    assert r.failed == {"b": "RuntimeError: Unable to find address for: nope0"}
    assert r.error == "the rank on b failed first; stopped the launcher on a, c"


def test_ranks_hung_at_the_deadline_are_all_named():
    members = [AR.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in "ab"]
    results = {"a": Done(124, AR.LOG + "LAUNCH WARNING master not ready", ""),
               "b": Done(-9, "", "")}
    # a's own `timeout` ended it first (exit 124); b was stopped: both hung, neither blamed.
    r = AR._summarise(members, "gloo", 2, ("a", "b"), results, ["a"], AR.AllReduceOptions(),
                      1.0)
    assert set(r.failed) == {"a", "b"} and r.error and r.error.startswith("no result within")
    assert r.failed["a"] == ("hung; its log last said: did not finish within the time limit; "
                             "log: LAUNCH WARNING master not ready")


def test_results_come_from_rank_zero():
    out = (AR.RESULT + '{"rank": 1, "world": 2, "backend": "gloo", "sizes": []}\n' + AR.RESULT
           + '{"rank": 0, "world": 2, "backend": "gloo", "sizes": [{"bytes": 1048576, '
           '"seconds": 0.01}]}\n' + AR.HINT + "NCCL INFO NET/Socket : Using eth0\n")
    members = [AR.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in "ab"]
    r = AR._summarise(members, "gloo", 2, ("a", "b"), {"a": Done(0, out, ""),
                      "b": Done(0, "", "")}, ["a", "b"], AR.AllReduceOptions(), 1.0)
    assert r.error is None and r.ranks == 2 and r.logs == {"a": "NCCL INFO NET/Socket : "
                                                           "Using eth0"}
    [size] = r.sizes
    assert size.nbytes == 1048576 and size.busbw == pytest.approx(1048576 / 0.01)
