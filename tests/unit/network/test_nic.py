"""NIC error counters read around the tests: what grew, and how iperf3 streams are chosen
from what the NICs negotiated."""

from __future__ import annotations

from preflight.network import nic
from preflight.network.iperf import IperfOptions, client_command, streams_for


def test_only_counters_that_grew_are_kept_and_resets_are_ignored():
    before = {"a": {"rx_crc_errors": 10, "rx_dropped": 5, "tx_errors": 0},
              "b": {"rx_missed_errors": 100}, "c": {"rx_errors": 1}}
    after = {"a": {"rx_crc_errors": 25, "rx_dropped": 5, "tx_errors": 0},
             "b": {"rx_missed_errors": 3}}  # b's driver reset its counters; c did not answer
    got = nic.grown(before, after, {"a": "eth0", "b": "ib0", "c": "eth1"})
    assert {h: (c.interface, dict(c.grew)) for h, c in got.items()} == {
        "a": ("eth0", {"rx_crc_errors": 15}), "b": ("ib0", {})}


def test_counter_lines_are_parsed_and_noise_skipped():
    text = (f"{nic.MARK}rx_crc_errors 7\n{nic.MARK}rx_dropped 12\n{nic.MARK}bogus 3\n"
            f"{nic.MARK}tx_errors n/a\nsomething else\n")
    assert nic.parse_counters(text) == {"rx_crc_errors": 7, "rx_dropped": 12}


def test_fast_nics_get_parallel_streams_unless_told():
    auto = IperfOptions()
    assert streams_for(100_000, 100_000, auto) == 4
    assert streams_for(100_000, 10_000, auto) == 1  # the slower end decides
    assert streams_for(None, 100_000, auto) == 1  # unknown (veth): one stream
    assert streams_for(10_000, 10_000, IperfOptions(streams=2)) == 2
    assert " -P 4 " in client_command("10.0.0.2", auto, 4)
    assert "-P" not in client_command("10.0.0.2", auto, 1)
