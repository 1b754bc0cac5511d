"""Localising slow links: slow hosts versus slow paths, against the cluster's own median."""

from __future__ import annotations

import pytest
from support import G, link, slow_host, survey

from preflight.common.localise import localise, measured, reference_bps, suspect_threshold
from preflight.model.measure import RETEST
from preflight.network.schedule import matrix_rounds


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_ring_names_the_slow_host_not_its_neighbours(n):
    hosts = [f"h{i}" for i in range(n)]
    runs = survey(hosts, slow_host("h1"))
    ref = reference_bps(runs)
    assert ref == 10 * G  # a median over hosts' best links: the slow one cannot drag it down
    loc = localise(runs, 0.75 * ref)
    assert loc.slow_hosts == {"h1": ("send", "receive")}
    assert loc.slow_paths == ()


def test_a_slow_sender_only_is_named_for_sending():
    hosts = ["a", "b", "c", "d"]
    loc = localise(survey(hosts, slow_host("c", both=False)), 7.5 * G)
    assert loc.slow_hosts == {"c": ("send",)}
    assert loc.explains("c", "a") and not loc.explains("a", "c")


def test_one_slow_pair_between_healthy_hosts_is_a_path():
    hosts = ["a", "b", "c", "d"]
    runs = survey(hosts, lambda s, r: 1 * G if (s, r) == ("b", "c") else 10 * G,
                  matrix_rounds)
    ref = reference_bps(runs)
    assert ref is not None
    loc = localise(runs, 0.75 * ref)
    assert loc.slow_hosts == {} and loc.slow_paths == (("b", "c"),)


def test_two_hosts_have_no_median_to_compare_with():
    runs = survey(["a", "b"], lambda s, r: 1 * G)
    assert reference_bps(runs) is None
    assert suspect_threshold(runs, 0.75, 0.0) is None
    assert suspect_threshold(runs, 0.75, 5 * G) == 5 * G  # an absolute floor still applies


def test_floor_wins_when_higher_than_the_relative_bar():
    runs = survey(["a", "b", "c"], lambda s, r: 1 * G)
    assert suspect_threshold(runs, 0.75, 0.0) == pytest.approx(0.75 * G)
    assert suspect_threshold(runs, 0.75, 10 * G) == 10 * G
    assert set(localise(runs, 10 * G).slow_hosts) == {"a", "b", "c"}


def test_failed_and_retest_runs_are_not_survey_figures():
    runs = [link("a", "b", None), link("b", "a", 1 * G), link("a", "b", 2 * G, RETEST)]
    assert [(r.sender, r.receiver) for r in measured(runs)] == [("b", "a")]
    assert [r.bps for r in measured(runs, RETEST)] == [2 * G]
