"""What a judgement costs grows with the ranks, not their square; the peers' median read from
one sorted pool is the same figure, to the bit, as the median of the list built without the
rank's own values, which it replaces."""

from __future__ import annotations

import random
import time

import pytest
from watchtools import POLICY, FakeHost, FakeRank

from preflight.model.findings import Status
from preflight.watch.judge import judge
from preflight.watch.medians import Pool, median
from preflight.watch.samples import HostStream
from preflight.watch.series import WatchState

Named = list[tuple[str, tuple[str, ...]]]


def judgement_cpu(hosts: int, per_host: int = 8, repeat: int = 3) -> tuple[float, Named]:
    """The CPU of one judgement (the least of `repeat`, each after a new sample from every
    host) of a job of hosts x per_host ranks, one rank of the middle host kept busy while its
    peers wait (waiting for a CPU: other work on its host); and what the last judgement
    named."""
    fleet = [FakeHost(f"n{i:04d}", [FakeRank(1000 + j, i * per_host + j) for j in range(per_host)],
                      netns=f"net:[{4026532000 + i}]") for i in range(hosts)]
    state = WatchState(keep=12)
    streams = {h.name: HostStream(h.name) for h in fleet}
    cpu, findings = [], []
    for i in range(9 + repeat):
        if i == 4:
            for h in fleet:
                for r in h.ranks:
                    r.busy = 0.16
            fleet[hosts // 2].ranks[0].busy = 0.9
            fleet[hosts // 2].ranks[0].wait = 0.5
        for h in fleet:
            state.add(streams[h.name].feed(h.line(POLICY.interval_s)), received=float(i))
        if i >= 9:
            t0 = time.process_time()
            findings = judge(state, POLICY, float(i), {}, {})
            cpu.append(time.process_time() - t0)
    named = [(f.check, f.hosts) for f in findings if f.status is not Status.PASS]
    return min(cpu), named


def test_a_judgement_of_eight_times_the_ranks_costs_far_less_than_the_square():
    # Linear: 8 x; the peers' median built per rank made it 64 x (0.32 s at 1,024 ranks,
    # 18 s at 8,000; bench/bench_judge.py). The bar leaves room for a noisy machine.
    small, named_small = judgement_cpu(32)
    large, named_large = judgement_cpu(256)
    assert named_small == [("straggler", ("n0016",))]
    assert named_large == [("straggler", ("n0128",))]
    assert large < 24 * max(small, 1e-4), (small, large)


@pytest.mark.parametrize("seed", range(40))
def test_the_median_without_own_values_is_the_median_of_the_rest(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 30)
    # Few distinct values, so that own values have equals in the pool (ranks that step alike).
    values = [rng.choice([0.0, 0.16, 0.4, 0.9, 1.0 / 3, rng.random()]) for _ in range(n)]
    pool = Pool(values)
    for drop in range(1, min(2, n) + 1):
        own = rng.sample(range(n), drop)
        rest = [v for i, v in enumerate(values) if i not in own]
        got = pool.median_without(*(values[i] for i in own))
        assert got == (median(rest) if rest else None), (values, own)
    # The least of the medians without one value: the bar no rank's peers' median is under.
    least = min((median(values[:i] + values[i + 1:]) for i in range(n)), default=None) \
        if n >= 2 else None
    assert pool.least_without() == least, values


def test_a_value_not_in_the_pool_is_refused():
    with pytest.raises(ValueError):
        Pool([1.0, 2.0]).median_without(3.0)
    with pytest.raises(ValueError):  # one occurrence each: twice needs two in the pool
        Pool([1.0, 2.0]).median_without(1.0, 1.0)


def test_a_pool_of_one_without_it_has_no_median():
    assert Pool([5.0]).median_without(5.0) is None
    assert Pool([]).median_without() is None
