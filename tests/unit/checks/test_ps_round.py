"""ps-round on measured rounds (no Paddle here): the round ran; a server that holds every
trainer is told from a trainer slow on its own; a build without the PS core says why."""

from __future__ import annotations

from dataclasses import replace

from support import NODES, G, cpu, net_tests, survey, with_network

from preflight.checks import ps_round
from preflight.model.findings import Status
from preflight.model.measure import PsRound, PsServer, PsTrainer

ROLES = {"node01": "server", "node02": "server", "node03": "trainer", "node04": "trainer"}


def trainer(host: str, index: int, steps_per_s: float = 100.0,
            wait_s: float | None = 2.0) -> PsTrainer:
    return PsTrainer(host, index, int(steps_per_s * 5), 5.0, 1 / steps_per_s, wait_s)


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
    assert "3 trainer(s) at 100 steps/s median (10 ms a step), 40% of it off the CPU " \
        "(waiting on pulls and pushes, or for a core), 2 server(s)" in f.message
    # A round from before the wait was measured says nothing of it.
    [old] = judged(healthy(trainers=tuple(replace(t, wait_s=None)
                                          for t in healthy().trainers)))
    assert "waiting" not in old.message and old.data["wait_share"] is None


def test_a_throttled_server_holds_every_trainer_and_is_named_with_its_role():
    ps = healthy(servers=(server("node01", throttled_s=3.0), server("node02")))
    found = judged(ps)
    [bad] = [f for f in found if f.status is Status.FAIL]
    assert bad.hosts == ("node01",)
    assert bad.message.startswith("node01 (PS server): holds every trainer: its cgroup "
                                  "throttled it 40 times, 3 s of the 8 s it served")
    assert "100 steps/s median, 40% of their steps off the CPU (async)" in bad.message
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


# What the hosts of a real round printed (Paddle 2.6.2, the rig) when one trainer's protobuf
# 7 killed it at its start: the others timed out waiting on it.
OUT_OF_TIME = ('did not finish within the time limit; log: [TimeInfo: *** Aborted at '
               '1795585908 (unix time) try "date -d @1795585908" if you are using GNU date ***]')
GLOO = ("RuntimeError: [/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:587] TIMEOUT "
        "self_rank = {me} pair_rank = 1 peer_str = [10.0.0.3]:36515")
ADDRESSES = {"node01": "10.0.0.1", "node02": "10.0.0.2", "node03": "10.0.0.3",
             "node04": "10.0.0.4"}
TYPE_ERROR = "TypeError: a_sync_configs is not a attribute of DistributedStrategy"


def test_the_host_that_failed_on_its_own_is_named_not_those_that_waited_on_it():
    ps = healthy(trainers=(), error="the job failed on node01 and 3 more host(s)",
                 addresses=ADDRESSES, failed={
                     "node01": OUT_OF_TIME, "node02": GLOO.format(me=0),
                     "node03": TYPE_ERROR, "node04": GLOO.format(me=2)})
    [f] = judged(ps)
    assert f.status is Status.FAIL and f.hosts == ("node03",)
    assert f.message == (f"node03 (PS trainer): the PS job failed there: {TYPE_ERROR}; "
                         "node01, node02, node04 then waited on it and stopped")


def test_where_every_host_only_waited_the_peer_gloo_names_is_the_cause():
    ps = healthy(trainers=(), error="the job failed on node01 and 3 more host(s)",
                 addresses=ADDRESSES, failed={
                     "node01": OUT_OF_TIME, "node02": GLOO.format(me=0),
                     "node03": OUT_OF_TIME, "node04": GLOO.format(me=2)})
    [f] = judged(ps)
    assert f.hosts == ("node03",) and f.message.startswith(
        f"node03 (PS trainer): the PS job failed there: {OUT_OF_TIME}; node01, node02, node04 then")


def test_a_round_that_ran_out_of_time_everywhere_names_every_host():
    ps = healthy(trainers=(), error="the job failed on node01 and 3 more host(s)",
                 addresses=ADDRESSES, failed={h: OUT_OF_TIME for h in ADDRESSES}, attempts=2)
    found = judged(ps)
    assert sorted(f.hosts for f in found) == [(h,) for h in sorted(ADDRESSES)]
    assert all(f.status is Status.FAIL and "then waited" not in f.message for f in found)
    assert all(f.message.endswith("(run twice, it hung both times)") for f in found)



def test_a_host_whose_rank_raised_is_named_though_its_launcher_ran_out_of_time():
    # GEO with a table it cannot take (Paddle 2.6.2, the rig): one trainer raised, the
    # launchers never ended and every host's time ran out.
    raised = (f"{OUT_OF_TIME.split(';')[0]}; log: ValueError: (InvalidArgument) The Variable "
              "type must be N3phi11DenseTensorE, but the type it holds is N3phi12SelectedRowsE.")
    ps = healthy(trainers=(), error="the job failed on node01 and 3 more host(s)",
                 addresses=ADDRESSES, failed={"node01": OUT_OF_TIME, "node02": OUT_OF_TIME,
                                              "node03": raised, "node04": OUT_OF_TIME})
    [f] = judged(ps)
    assert f.hosts == ("node03",) and "ValueError: (InvalidArgument)" in f.message
