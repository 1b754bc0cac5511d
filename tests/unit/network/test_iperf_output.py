"""iperf3 -J parsing, on outputs captured from real runs between simulated hosts."""

from __future__ import annotations

import json
import pathlib

import pytest

from preflight.network.iperf import parse_iperf3

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "iperf3"


def golden(name: str) -> str:
    return str(json.loads((GOLDEN / f"{name}.json").read_text())["output"])


def test_unthrottled_link():
    r = parse_iperf3(golden("client-unthrottled"))
    assert r.error is None and r.received_bps is not None and r.received_bps > 1e9
    assert r.retransmits is not None and r.seconds == pytest.approx(1.0, abs=0.1)


def test_tbf_limited_link_reads_its_rate():
    r = parse_iperf3(golden("client-tbf-100mbit"))
    assert r.received_bps is not None and 80e6 < r.received_bps < 101e6


def test_refused_is_an_error_from_the_json():
    r = parse_iperf3(golden("client-refused"))
    assert r.error == "unable to connect to server: Connection refused"
    assert r.received_bps is None


@pytest.mark.parametrize("text,fragment", [
    ("", "not JSON"), ("iperf3: error - unable to connect", "not JSON"), ("[1]", "not a JSON"),
    ('{"start": {}}', "no end.sum_sent"), ("x" * (5 << 20), "over the limit"),
], ids=["empty", "plain-text", "list", "truncated-run", "huge"])
def test_broken_output(text, fragment):
    assert fragment in (parse_iperf3(text).error or "")


def test_loss_rate_from_retransmits_segment_size_and_bytes():
    r = parse_iperf3(golden("client-unthrottled"))
    assert r.mss == 1448 and r.sent_bytes and r.retransmits is not None
    assert r.loss_pct == pytest.approx(100 * r.retransmits * 1448 / r.sent_bytes)
    # a healthy veth: a few hundred segments of millions
    assert r.loss_pct is not None and r.loss_pct < 0.1
    assert parse_iperf3(golden("client-refused")).loss_pct is None


def test_the_warm_up_a_run_left_out_is_read_from_its_own_report():
    # Captured with -O 0: no second left out, so its retransmits hold TCP's slow start.
    text = golden("client-tbf-100mbit")
    assert parse_iperf3(text).warmup_s == 0
    assert parse_iperf3(text.replace('"omit":\t0', '"omit":\t1')).warmup_s == 1
    assert parse_iperf3(text.replace('"omit":\t0,', '')).warmup_s is None
