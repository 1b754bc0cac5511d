"""ps-round on measured rounds (no Paddle here): the round ran; a server that holds every
trainer is told from a trainer slow on its own; a build without the PS core says why."""

from __future__ import annotations

from dataclasses import replace

from support import NODES, G, cpu, net_tests, survey, with_network

from preflight.checks import ps_round
from preflight.model.findings import Status
from preflight.model.measure import PsRound, PsServer, PsTrainer

ROLES = {"node01": "server", "node02": "server", "node03": "trainer", "node04": "trainer"}


def trainer(host: str, index: int, steps_per_s: float = 100.0) -> PsTrainer:
    return PsTrainer(host, index, int(steps_per_s * 5), 5.0, 1 / steps_per_s)


def server(host: str, throttled_s: float = 0.0) -> PsServer:
    return PsServer(host, 1, 8.0, 1.2, 40 if throttled_s else 0, throttled_s, 10**7, 10**7)


def judged(ps: PsRound | None = None, skipped: str | None = None, **cpus):
    net = replace(net_tests(survey(NODES, lambda s, r: 9.4 * G)), ps=ps, ps_skipped=skipped)
    c = with_network(net)
    if cpus:
        c = replace(c, outcomes=tuple(
            replace(o, facts=replace(o.facts, cpu=cpus[o.host.name]))
            if o.host.name in cpus and o.facts else o for o in c.outcomes))
    return list(ps_round.check(c))


def healthy(**changes) -> PsRound:
    base = PsRound(tuple(NODES), "async", ROLES,
                   (trainer("node03", 0), trainer("node04", 1), trainer("node03", 2)),
                   (server("node01"), server("node02")), wall_s=16.0, seconds=5.0)
    return replace(base, **changes)


def test_a_round_that_kept_up_passes_with_its_figures():
    [f] = judged(healthy())
    assert f.status is Status.PASS and f.hosts == tuple(NODES)
    assert "3 trainer(s) at 100 steps/s median (10 ms a step), 2 server(s)" in f.message


def test_a_throttled_server_holds_every_trainer_and_is_named_with_its_role():
    ps = healthy(servers=(server("node01", throttled_s=3.0), server("node02")))
    found = judged(ps)
    [bad] = [f for f in found if f.status is Status.FAIL]
    assert bad.hosts == ("node01",)
    assert bad.message.startswith("node01 (PS server): holds every trainer: its cgroup "
                                  "throttled it 40 times, 3 s of the 8 s it served")
    assert [f.hosts for f in found if f.status is Status.PASS] == [
        ("node02", "node03", "node04")]


def test_a_short_cpu_is_the_servers_evidence():
    [bad, _] = judged(healthy(), node02=cpu(effective=0.25))
    assert bad.hosts == ("node02",) and "its host is short of CPU" in bad.message


def test_a_slow_trainer_slows_only_itself_in_async_mode():
    ps = healthy(trainers=(trainer("node03", 0), trainer("node04", 1, steps_per_s=20),
                           trainer("node03", 2)))
    found = judged(ps, node04=cpu(effective=0.25))
    [slow] = [f for f in found if f.status is Status.WARN]
    assert slow.hosts == ("node04",) and "trainer 1 is slow on its own: 20 steps/s vs " \
        "100 median" in slow.message and "explained by its CPU" in slow.message
    assert "slows only itself" in slow.message
    assert not [f for f in found if f.status is Status.FAIL]


def test_a_host_where_the_job_failed_fails_with_its_words():
    ps = healthy(error="the job failed on node02", failed={
        "node02": "TypeError: Descriptors cannot be created directly"})
    [f] = judged(ps)
    assert f.status is Status.FAIL and f.hosts == ("node02",)
    assert f.message == ("node02 (PS server): the PS job failed there: TypeError: "
                         "Descriptors cannot be created directly")


def test_no_ps_core_is_could_not_check_with_the_version():
    [f] = judged(skipped="Paddle 3.3.1 on node[01-04] has no parameter-server core")
    assert f.status is Status.COULD_NOT_CHECK and "Paddle 3.3.1" in f.message


def test_no_round_no_finding():
    assert judged() == []
