"""A job's start and end. At its start every rank imports and builds at once, sharing its
host's CPUs: no one is compared until warmed up. At its end its ranks leave one by one as they
finish, a rank 0 last (saving the final model, tearing down busy). Those left while the others
are gone are finishing, not stragglers, and the ones that left first are not dead for it; a
rank that ends while its peers step on is still named."""

from __future__ import annotations

from watchtools import cluster, named, nobody_named, watched

from preflight.model.findings import Finding

FINISHED = ("step 300 loss 0.01", "done")


def leaves(hosts, *names: str):
    """The rank of each named host ends cleanly now (its log's last lines FINISHED)."""
    for h in hosts:
        if h.name in names and h.ranks:
            r = h.ranks.pop()
            r.tail = FINISHED
            h.gone = [r]


def test_ranks_left_behind_by_their_peers_at_the_end_are_not_compared_and_nobody_is_named():
    hosts = cluster(4)
    for h in hosts:  # rank 0 busier than its peers by design
        h.ranks[0].busy, h.ranks[0].wait = (0.65, 0.02) if h is hosts[0] else (0.05, 0.0)
    every: list[list[Finding]] = []

    def change(t):
        if t == 60:  # two ranks finish; rank 0 tears down busy, waiting on its own threads
            leaves(hosts, "node03", "node04")
            for h in hosts[:2]:
                h.ranks[0].steps_per_s = 0.0
            hosts[0].ranks[0].busy, hosts[0].ranks[0].wait = 1.3, 0.6
            hosts[1].ranks[0].busy, hosts[1].ranks[0].wait = 0.05, 0.0
        if t == 70:
            leaves(hosts, "node01", "node02")

    found, _ = watched(hosts, 80, change=change, every=every)
    nobody_named(every)
    ending = [f for judged in every for f in judged if f.check == "ending"]
    assert ending and ending[0].message.startswith("2 of 4 ranks of master 10.0.0.1:6767 "
                                                   "ended since "), ending[:1]
    assert "none in error; the 2 left are finishing" in ending[0].message
    assert [(f.check, f.status.value) for f in found] == [("ended", "pass")], found


def test_a_rank_0_saving_the_final_model_long_after_its_peers_left_names_nobody():
    hosts = cluster(4)
    every: list[list[Finding]] = []

    def change(t):
        if t == 60:  # its peers finish; rank 0 writes the model for a minute
            leaves(hosts, "node02", "node03", "node04")
            r = hosts[0].ranks[0]
            r.steps_per_s, r.busy, r.wait, r.write_rate = 0.0, 0.9, 0.02, 80e6
        if t == 120:
            leaves(hosts, "node01")

    found, _ = watched(hosts, 130, change=change, every=every)
    nobody_named(every)
    assert [(f.check, f.status.value) for f in found] == [("ended", "pass")], found


def test_a_rank_that_ends_while_its_peers_step_on_is_still_named_dead():
    hosts = cluster(4)

    def change(t):
        if t == 40:
            leaves(hosts, "node03")

    found, _ = watched(hosts, 80, change=change)
    assert ("dead", named(found, "dead")[0][1], ("node03",)) in named(found, "dead"), found
    assert not any(f.check == "ending" for f in found)


def test_a_rank_that_ends_in_error_while_the_job_ends_is_no_ending():
    hosts = cluster(4)
    every: list[list[Finding]] = []

    def change(t):
        if t == 40:
            leaves(hosts, "node03")
            hosts[2].gone[0].tail = ("Traceback (most recent call last):",
                                     "RuntimeError: CUDA error: an illegal memory access")

    watched(hosts, 60, change=change, every=every)
    assert not any(f.check == "ending" for judged in every for f in judged)
    dead = [f for judged in every for f in judged if f.check == "dead"]
    assert dead and dead[0].hosts == ("node03",), dead[:1]


def test_ranks_warming_up_together_short_of_cpu_name_nobody():
    """Launched together, every rank imports and builds before its first step: the host's
    CPUs are shared by all of them, rank 0 busiest and waiting most. No one is named for it."""
    hosts = cluster(4, steps_per_s=0.0, busy=0.4, wait=0.25)
    hosts[0].ranks[0].busy, hosts[0].ranks[0].wait = 1.1, 0.6
    every: list[list[Finding]] = []

    def change(t):
        if t == 25:  # warmed up: each steps, at its own design's figures
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy, h.ranks[0].wait = 10.0, 0.4, 0.02

    watched(hosts, 60, change=change, every=every)
    nobody_named(every)
