"""The medians the watch compares ranks by: of a list, and of a job's ranks' values without
a rank's own (its peers'), read in O(log n) from one sorted pool."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Optional


def median(values: Sequence[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


class Pool:
    """Values of a job's ranks, sorted once, whose median without a rank's own values (its
    peers') is read in O(log n): each rank's peers' median, a list built per rank, made the
    judgement grow with the square of the ranks (0.3 s of CPU at 1,024 ranks)."""

    def __init__(self, values: Iterable[float]) -> None:
        self.v = sorted(values)

    def median_without(self, *own: float) -> Optional[float]:
        """The median of the pool with one occurrence of each of own left out (each must be
        in it); None when nothing is left. Equal to median() of that list, to the bit."""
        if len(own) == 1:  # a rank's peers: every rank, every rule, every judgement
            return self._without_one(own[0])
        out: list[int] = []  # the sorted positions left out
        for x in own:
            i = bisect.bisect_left(self.v, x)
            while i in out:
                i += 1
            if i >= len(self.v) or self.v[i] != x:
                raise ValueError(f"{x!r} is not in the pool")
            out.append(i)
        out.sort()
        n = len(self.v) - len(out)
        if n <= 0:
            return None

        def at(j: int) -> float:  # the j-th value of what is left
            for k in out:
                if j >= k:
                    j += 1
            return self.v[j]

        return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2

    def least_without(self) -> Optional[float]:
        """The least of median_without(x) over the values x of the pool: without its largest
        (leaving out a value at or above the median lowers it, or keeps it); None when the
        pool has fewer than two values."""
        return self._without_one(self.v[-1]) if len(self.v) >= 2 else None

    def _without_one(self, x: float) -> Optional[float]:
        """median_without(x), with no list or closure built: the values left are the pool's
        with position i (x's) skipped, so the j-th of them is v[j] below i, else v[j + 1]."""
        v = self.v
        i = bisect.bisect_left(v, x)
        if i >= len(v) or v[i] != x:
            raise ValueError(f"{x!r} is not in the pool")
        n = len(v) - 1
        if n <= 0:
            return None
        k = n // 2
        hi = v[k] if k < i else v[k + 1]
        if n % 2:
            return hi
        lo = v[k - 1] if k - 1 < i else v[k]
        return (lo + hi) / 2
