"""How quantities and host lists are written (report/units.py)."""

from __future__ import annotations

import pytest

from preflight.common.units import gbytes, hosts_text, port_ranges, rate


@pytest.mark.parametrize("bps,text", [(941e6, "941 Mbit/s"), (9.41e9, "9.41 Gbit/s"),
                                      (1e9, "1 Gbit/s"), (0.0, "0 Mbit/s")])
def test_rate(bps, text):
    assert rate(bps) == text


def test_gbytes():
    assert gbytes(1.234e9) == "1.23 GB/s"


def test_port_ranges():
    assert port_ranges((1, 2, 3, 5, 7, 8)) == "1-3, 5, 7-8"
    assert port_ranges(()) == ""


def test_hosts_text_shortens_long_lists():
    assert hosts_text(["a", "b"]) == "a, b"
    assert hosts_text([f"n{i}" for i in range(9)]) == "n0, n1, n2, n3, n4, n5, ... (+3 more)"
