"""A PS server saving its tables: busy a core where it was busy half of one from its start,
nothing on its host holding it, while its trainers' send queues to it fill and they slow to
half their pace. Its own work keeps it from reading them: a phase of the job's own, said at
every judgement and never its link; the same server starved by a quota is still named."""

from __future__ import annotations

from typing import Any

from watchtools import FakeHost, FakeRank, named, nobody_named, watched

from preflight.model.findings import Status

ARGV = ("python3", "-m", "paddle.distributed.launch", "--servers", "10.0.0.8:6070", "train.py")
ADDRESSES = {"10.0.0.8": "ps1", **{f"10.0.0.{i + 1}": f"node{i + 1:02d}" for i in range(3)}}


def ps_job() -> list[FakeHost]:
    hosts = [FakeHost(f"node{i + 1:02d}", [FakeRank(1000 + i, i, role="TRAINER")], argv=ARGV,
                      netns=f"net:[{i}]") for i in range(3)]
    return hosts + [FakeHost("ps1", [FakeRank(2000, 0, role="PSERVER", steps_per_s=0.0,
                                              quota=2.0, busy=0.5)],
                             argv=ARGV, netns="net:[90]")]


def saving(hosts, starved: bool = False, writes: float = 0.0):
    """change(t): from 120 s to 160 s the server works on its own (a core, on a CPU; with
    starved, under a quota of 0.25 core that throttles it) and its trainers' queues to it
    stay full while they step at half their pace."""
    server = hosts[3].ranks[0]

    def change(t):
        on = 120 <= t < 160
        for h in hosts[:3]:
            r = h.ranks[0]
            r.steps_per_s = 5.0 if on else 10.0
            r.sendq = {"10.0.0.8": 300 << 10} if on else {}
        server.busy, server.wait, server.state = (1.0, 0.03, "R") if on else (0.5, 0.03, "S")
        server.write_rate = writes if on else 0.0
        if starved:
            server.quota, server.throttled_share = (0.25, 0.9) if on else (2.0, 0.0)

    return change


def test_a_server_saving_its_tables_is_its_phase_not_its_link_at_every_judgement():
    hosts = ps_job()
    every: list[Any] = []
    found, state = watched(hosts, 240, change=saving(hosts, writes=60e6), addresses=ADDRESSES,
                           every=every, real_clock=True)
    nobody_named(every)
    said = [f for judged in every for f in judged if f.check == "phase"]
    assert said and {f.hosts for f in said} == {("ps1",)}
    first = said[0].message
    assert first.startswith("ps1 server 0 (server) is in a phase of the job's own: busy 1.00 "
                            "cores against 0.50 from its start, with nothing on ps1 holding "
                            "it"), first
    assert "it writes 60 MB/s to files: a save" in first, first
    assert "(node01->ps1 300 KiB, node02->ps1 300 KiB, node03->ps1 300 KiB) as it reads them "\
        "late: not its link; for 15 s so far" in first, first
    [job] = state.jobs.values()
    assert 25 <= job.ledger.seconds().get("checkpoints", 0.0) <= 45, job.ledger.seconds()


def test_a_starved_server_with_its_trainers_queues_full_is_still_named_for_its_cpu():
    hosts = ps_job()
    every: list[Any] = []
    watched(hosts, 200, change=saving(hosts, starved=True), addresses=ADDRESSES, every=every,
            real_clock=True)
    said = {n for judged in every for n in named(judged)}
    assert said == {("straggler", Status.FAIL, ("ps1",))}, said
    assert not any(f.check == "phase" for judged in every for f in judged)


def test_a_server_as_busy_as_from_its_start_explains_no_full_queue():
    # Busy a core from its start: no work of its own now that it had not then. Its
    # trainers' queues filling as they slow are the link rule's.
    hosts = ps_job()
    server = hosts[3].ranks[0]
    server.busy, server.state = 1.0, "R"

    def change(t):
        on = t >= 120
        for h in hosts[:3]:
            h.ranks[0].steps_per_s = 5.0 if on else 10.0
            h.ranks[0].sendq = {"10.0.0.8": 300 << 10} if on else {}

    every: list[Any] = []
    watched(hosts, 200, change=change, addresses=ADDRESSES, every=every, real_clock=True)
    assert not any(f.check == "phase" for judged in every for f in judged)
    said = {n for judged in every for n in named(judged)}
    assert said == {("straggler", Status.FAIL, ("ps1",))}, said
