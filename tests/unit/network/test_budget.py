"""The all-reduce sized to its budget from the slowest link among the ranks (network/budget)."""

from __future__ import annotations

import pytest

from preflight.model.measure import SizeResult, ring_seconds
from preflight.network.budget import LAUNCH_IDLE_S, MARGIN, SLACK_S, launch_idle_s, plan_sizes

G = 1e9


def test_ring_time_is_the_inverse_of_busbw():
    # busbw = algbw * 2(n-1)/n; at busbw equal to the link, the time is the ring's.
    t = ring_seconds(32 << 20, 4, 8e9)
    assert SizeResult(32 << 20, t, 4).busbw * 8 == pytest.approx(8e9)
    assert ring_seconds(1 << 20, 1, 1e9) == 0.0


def test_fast_links_keep_every_size_and_iteration():
    p = plan_sizes((32, 1, 8), 5, ranks=4, slowest_bps=10 * G, budget_s=30, timeout_cap_s=120)
    assert p.sizes_mib == (1, 8, 32) and p.iters == 5 and p.dropped == ()
    assert p.predicted_s is not None and p.predicted_s < 1
    # The collectives get twice the prediction (and a slack) from the moment all joined.
    assert p.collective_s is not None
    assert p.collective_s == pytest.approx(MARGIN * p.predicted_s + SLACK_S)
    # No fixed launch allowance inside the hard limit: the launch is cut when it stops
    # progressing, however long a large cluster's rendezvous takes.
    assert p.timeout_s == 120
    assert p.op_s == pytest.approx(ring_seconds(32 << 20, 4, 10 * G))


def test_a_slow_network_drops_the_sizes_it_cannot_carry_and_says_so():
    # Six hosts at 20 Mbit/s: 32 MiB needs ~22 s an iteration, 8 MiB ~5.6 s; 1 MiB fits.
    p = plan_sizes((1, 8, 32), 5, ranks=6, slowest_bps=20e6, budget_s=30, timeout_cap_s=120)
    assert p.sizes_mib == (1,) and p.iters == 5
    assert [d.split(" ")[0] for d in p.dropped] == ["8", "32"]
    assert "past the 30 s budget" in p.dropped[0]
    assert p.predicted_s is not None and p.predicted_s <= 30
    assert p.timeout_s <= 120


def test_iterations_give_way_before_the_smallest_size_and_it_always_runs():
    p = plan_sizes((1, 8), 5, ranks=6, slowest_bps=0.5e6, budget_s=30, timeout_cap_s=120)
    assert p.sizes_mib == (1,) and p.iters == 1
    assert any("run anyway" in d for d in p.dropped)
    assert p.timeout_s == 120  # the cap holds whatever the prediction


def test_without_a_measured_link_sizes_are_as_asked():
    p = plan_sizes((1, 8, 32), 5, ranks=4, slowest_bps=None, budget_s=30, timeout_cap_s=90)
    assert (p.sizes_mib, p.iters, p.predicted_s, p.timeout_s) == ((1, 8, 32), 5, None, 90)
    assert p.collective_s is None


def test_the_launch_may_idle_for_twice_the_slowest_measured_import():
    assert launch_idle_s([3.0, 25.5, 8.0]) == 51.0
    assert launch_idle_s([1.0]) == launch_idle_s([]) == LAUNCH_IDLE_S


def test_the_idle_window_grows_with_the_paddle_processes_that_share_a_core():
    # Alone on its host, each Paddle import is what the probe measured; six of them on one
    # core (three hosts sharing one kernel and one CPU: a launcher and a rank each) take about
    # six times as long before the first rank reports.
    assert launch_idle_s([4.0], crowding=6.0) == 48.0
    assert launch_idle_s([4.0], crowding=0.5) == launch_idle_s([4.0]) == LAUNCH_IDLE_S
    assert launch_idle_s([4.0], crowding=100.0) == 2 * 4.0 * 8  # bounded
