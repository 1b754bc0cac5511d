"""Schedules iperf3 pairs into rounds in which no host is in two pairs at once.

- ring: every host measured against its two ring neighbours, in a constant number of rounds
  whatever the host count (2 rounds of disjoint pairs per direction for an even count, 3 for
  an odd one), so a slow host shows on both of its links;
- matrix: every ordered pair once, by the circle method (round-robin tournament): n-1 rounds
  of n/2 disjoint pairs (n rounds with a bye when n is odd), each pair in both directions.
"""

from __future__ import annotations

from collections.abc import Sequence

Pair = tuple[str, str]  # (sender, receiver)
Round = list[Pair]


def ring_rounds(hosts: Sequence[str]) -> list[Round]:
    """Returns rounds covering each ring edge (i, i+1) in both directions."""
    n = len(hosts)
    if n < 2:
        return []
    if n == 2:
        return [[(hosts[0], hosts[1])], [(hosts[1], hosts[0])]]
    edges = [(i, (i + 1) % n) for i in range(n)]
    # Even n: edges alternate into two perfect matchings. Odd n: the last edge shares a host
    # with the first, so it gets a third matching of its own.
    groups = [edges[0:n - (n % 2):2], edges[1:n - (n % 2):2]]
    if n % 2:
        groups.append([edges[-1]])
    rounds: list[Round] = []
    for group in groups:
        rounds.append([(hosts[a], hosts[b]) for a, b in group])
        rounds.append([(hosts[b], hosts[a]) for a, b in group])
    return rounds


def matrix_rounds(hosts: Sequence[str]) -> list[Round]:
    """Returns rounds covering every ordered pair once (circle method, both directions)."""
    players: list[str | None] = list(hosts)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)  # a bye: whoever meets it sits the round out
    n = len(players)
    rounds: list[Round] = []
    for _ in range(n - 1):
        pairs = [(players[i], players[n - 1 - i]) for i in range(n // 2)]
        forward = [(a, b) for a, b in pairs if a is not None and b is not None]
        rounds.append(forward)
        rounds.append([(b, a) for a, b in forward])
        players = [players[0], players[-1], *players[1:-1]]  # rotate all but the first
    return rounds


def retest_rounds(pairs: Sequence[Pair], repeats: int, width: int) -> list[Round]:
    """Returns rounds measuring each pair `repeats` times, every pair once before any pair
    again (a moment of contention then rarely hits both runs of a pair), with at most `width`
    pairs a round and no host in two pairs of a round: each link is alone on its hosts' NICs
    while it is measured again."""
    rounds: list[Round] = []
    for _ in range(repeats):
        left = list(dict.fromkeys(pairs))
        while left:
            busy: set[str] = set()
            rnd: Round = []
            for pair in list(left):
                if len(rnd) < width and not busy & set(pair):
                    rnd.append(pair)
                    busy.update(pair)
                    left.remove(pair)
            rounds.append(rnd)
    return rounds
