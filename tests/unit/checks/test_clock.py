"""The clock check: host clocks within the policy's bounds of the controller."""

from __future__ import annotations

import pytest
from support import cluster, messages

from preflight.checks import clock
from preflight.model import facts as F
from preflight.model.findings import Status


@pytest.mark.parametrize("skew,status", [(0.3, None), (2.0, Status.WARN), (30.0, Status.FAIL),
                                         (-30.0, Status.FAIL)])
def test_clock(skew, status):
    hosts = {f"n{i}": {"clock": F.ClockFacts(0.0, 0.01 * i)} for i in range(4)}
    hosts["odd"] = {"clock": F.ClockFacts(0.0, skew)}
    fs = list(clock.check(cluster(**hosts)))
    bad = [f for f in fs if f.status is not Status.PASS]
    if status is None:
        assert bad == []
    else:
        assert [(f.status, f.hosts) for f in bad] == [(status, ("odd",))]
        word = "ahead of" if skew > 0 else "behind"
        assert f"odd: clock {abs(skew) - 0.02:.1f} s {word} the cluster median" in bad[0].message


def test_clock_unreported():
    fs = list(clock.check(cluster(a={}, b={"clock": F.SectionError("missing")})))
    assert messages(fs, Status.COULD_NOT_CHECK) == ["b: could not read the clock: missing"]


def test_a_late_probe_is_no_clock_ahead_but_a_clock_that_cannot_be_judged():
    # One Slurm step for all: node03's slurmd starved, its probe started 3 s late and ended
    # last. All clocks agree; what differs is the delay around each stamp.
    hosts = {f"node0{i}": {"clock": F.ClockFacts(0.0, 0.1, 0.15)} for i in (1, 2, 4)}
    hosts["node03"] = {"clock": F.ClockFacts(0.0, 3.5, 3.5)}  # [0, 7]: 0 is possible
    fs = list(clock.check(cluster(**hosts)))
    [odd] = [f for f in fs if f.status is not Status.PASS]
    assert odd.status is Status.COULD_NOT_CHECK and odd.hosts == ("node03",)
    assert odd.message.startswith("node03: could not judge its clock: its probe's command was")
    assert "ahead" not in odd.message
    [ok] = [f for f in fs if f.status is Status.PASS]
    assert ok.hosts == ("node01", "node02", "node04")


def test_a_late_probe_within_the_fail_bound_passes_judged_to_that_bound():
    # [0, 3]: within 5 s whatever the delays were, not within 1 s: a pass that says so, not
    # a block (a loaded controller makes every probe late).
    hosts = {f"node0{i}": {"clock": F.ClockFacts(0.0, 0.1, 0.15)} for i in (1, 2, 4)}
    hosts["node03"] = {"clock": F.ClockFacts(0.0, 1.5, 1.5)}
    fs = list(clock.check(cluster(**hosts)))
    assert all(f.status is Status.PASS for f in fs)
    [loose] = [f for f in fs if f.hosts == ("node03",)]
    assert loose.message.startswith("node03: clock within 3.0 s of the cluster median, "
                                    "judged to that only: its probe's command was")


def test_a_clock_off_by_more_than_its_delays_allow_is_named_by_the_near_end():
    hosts = {f"node0{i}": {"clock": F.ClockFacts(0.0, 0.1, 0.15)} for i in (1, 2, 4)}
    hosts["node03"] = {"clock": F.ClockFacts(0.0, 31.5, 1.5)}  # 30 to 33 s ahead
    [odd] = [f for f in clock.check(cluster(**hosts)) if f.status is not Status.PASS]
    assert odd.status is Status.FAIL
    assert odd.message.startswith("node03: clock at least 29.8 s ahead of the cluster median")


def test_the_clock_interval_is_the_commands_delays_not_the_probes_run():
    from preflight.collect.parse import clock as parse_clock

    # Sent at 100.0, answered at 110.0; the probe ran from 100.2 to 109.9 on a clock 5 s
    # ahead: started 105.2, stamped 114.9. The 9.7 s run is no uncertainty.
    c = parse_clock({"epoch": 114.9}, received_at=110.0, sent_at=100.0, started=105.2)
    assert c.skew_s == pytest.approx(5.05) and c.uncertainty_s == pytest.approx(0.15)
    assert parse_clock({"epoch": 114.9}, received_at=110.0).skew_s == pytest.approx(4.9)
