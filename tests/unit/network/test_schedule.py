"""iperf3 pair schedules: disjoint pairs per round, full coverage, constant ring rounds."""

from __future__ import annotations

from itertools import permutations

import pytest

from preflight.network.schedule import matrix_rounds, retest_rounds, ring_rounds


def hosts(n: int) -> list[str]:
    return [f"h{i:02d}" for i in range(n)]


def assert_disjoint(rounds):
    for r in rounds:
        used = [h for pair in r for h in pair]
        assert len(used) == len(set(used)), r


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9, 16, 31, 32, 64])
def test_ring_covers_both_neighbours_in_constant_rounds(n):
    rounds = ring_rounds(hosts(n))
    assert_disjoint(rounds)
    assert len(rounds) == (2 if n == 2 else 4 if n % 2 == 0 else 6)
    pairs = [p for r in rounds for p in r]
    assert len(pairs) == len(set(pairs))
    names = hosts(n)
    for i, h in enumerate(names):
        nxt = names[(i + 1) % n]
        assert (h, nxt) in pairs and (nxt, h) in pairs  # each ring edge, both directions


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 16, 33])
def test_matrix_covers_every_ordered_pair_once(n):
    rounds = matrix_rounds(hosts(n))
    assert_disjoint(rounds)
    assert len(rounds) == 2 * (n - 1 if n % 2 == 0 else n)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == sorted(permutations(hosts(n), 2))
    if n % 2 == 0:
        assert all(len(r) == n // 2 for r in rounds)


def test_fewer_than_two_hosts_need_no_rounds():
    assert ring_rounds(["a"]) == matrix_rounds(["a"]) == []


@pytest.mark.parametrize("width", [1, 2, 4])
def test_retest_rounds_repeat_every_pair_with_no_host_twice_in_a_round(width):
    pairs = [("s1", "r1"), ("s2", "r1"), ("s3", "r2"), ("s4", "r3"), ("s5", "r4"), ("r1", "s1")]
    rounds = retest_rounds(pairs, 2, width)
    flat = [p for rnd in rounds for p in rnd]
    assert sorted(flat) == sorted(pairs * 2)
    for rnd in rounds:
        hosts = [h for p in rnd for h in p]
        assert len(rnd) <= width and len(hosts) == len(set(hosts)), rnd
    # Every pair once before any pair again.
    half = len(pairs)
    assert sorted(flat[:half]) == sorted(pairs) == sorted(flat[half:])


def test_retest_rounds_one_by_one_keep_the_given_order():
    pairs = [("a", "b"), ("c", "d")]
    assert retest_rounds(pairs, 2, 1) == [[("a", "b")], [("c", "d")], [("a", "b")], [("c", "d")]]
