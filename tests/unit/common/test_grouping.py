"""How a plan's left-out hosts are grouped for a report: by their first reason, the host's
own name taken out of it only where it leads the reason's message."""

from __future__ import annotations

from preflight.common.grouping import left_out


def test_hosts_left_out_for_the_same_reason_share_a_line_without_their_names():
    excluded = {"n1": ["paddle-stack: n1: Paddle not importable"],
                "n2": ["paddle-stack: n2: Paddle not importable", "nofile: n2: 1024"],
                "n3": ["could not check (connect): connection refused"]}
    assert left_out(excluded) == [
        (["n1", "n2"], "paddle-stack: Paddle not importable", 0),
        (["n3"], "could not check (connect): connection refused", 0)]


def test_a_path_left_out_at_both_ends_says_the_path_for_each():
    # The receiver's name within the message is the path's, not a prefix to take out (it
    # read "bandwidth: a -> slow path" for b).
    why = "bandwidth: a -> b: slow path, 1 Gbit/s while both hosts are fine with other peers"
    assert left_out({"a": [why], "b": [why]}) == [(["a", "b"], why, 0)]
    assert left_out({"b": [why]}) == [(["b"], why, 0)]
    assert left_out({"b": ["b: slow host"]}) == [(["b"], "slow host", 0)]
