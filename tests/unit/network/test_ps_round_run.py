"""The PS round's commands and what its hosts printed (no Paddle here; the cluster tests run
it for real)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

from preflight.common.ps_failure import hung_without_cause
from preflight.common.remote import Done
from preflight.model.measure import PsRound, PsTrainer
from preflight.model.plan import Endpoint, Node, Plan
from preflight.model.policy import JobShape
from preflight.network.paddle_job import LOG, Member, stop_pattern
from preflight.network.ps_round import (
    PS_LINE,
    PsRoundOptions,
    round_command,
    summarise,
)

RUN_DIR = "/tmp/.preflight-ps-0123abcd-0"


def node(host: str = "n1", env: tuple[tuple[str, str], ...] = ()) -> Node:
    argv = ("/opt/py/bin/python", "-m", "paddle.distributed.launch", "--servers",
            "10.0.0.1:6070", "--trainers", "10.0.0.2:6070", "--host", "10.0.0.1")
    return Node(host, "10.0.0.1", "/opt/py/bin/python", 0, 1, (6070,), argv, env)


def test_the_round_runs_the_plans_own_launcher_line_with_its_variables():
    n = node(env=(("GLOO_SOCKET_IFNAME", "eth0"), ("POD_IP", "10.0.0.1")))
    m = Member("n1", None, n.python, n.address)  # type: ignore[arg-type]
    cmd = round_command(m, n, RUN_DIR, PsRoundOptions(seconds=3))
    script = shlex.split(cmd)[2]
    launch = next(line for line in script.splitlines() if "paddle.distributed.launch" in line)
    words = shlex.split(launch.split("then ", 1)[1].split(" > ", 1)[0])
    assert words[:5] == ["timeout", "-k", "3", str(int(180 + 10)), "env"]
    assert "GLOO_SOCKET_IFNAME=eth0" in words and "POD_IP=10.0.0.1" not in words
    i = words.index("/opt/py/bin/python")
    assert words[i:i + len(n.argv)] == list(n.argv)  # the plan's line, as emitted
    assert words[-2:] == ["--dir", RUN_DIR] and "--seconds" in words
    # Stopped by the same pattern as the all-reduce: the line ends with its run directory.
    import re
    assert re.search(stop_pattern(RUN_DIR), " ".join(words))


def _printed(*docs: dict[str, object], exit: int = 0, log: str = "") -> Done:
    lines = [PS_LINE + json.dumps(d) for d in docs] + [LOG + x for x in log.splitlines()]
    return Done(exit, "\n".join(lines), "")


def test_what_the_hosts_printed_makes_the_round():
    server = {"role": "server", "pid": 7, "first": {"at": 10.0, "cpu_s": 0.5, "throttled": 2,
                                                     "throttled_s": 0.1, "rx_bytes": 100,
                                                     "tx_bytes": 50},
              "last": {"at": 18.0, "cpu_s": 2.5, "throttled": 42, "throttled_s": 3.1,
                       "rx_bytes": 9100, "tx_bytes": 4050}}
    t0 = {"role": "trainer", "index": 0, "steps": 400, "seconds": 4.0, "median_s": 0.01,
          "wait_s": 1.0, "in_container": True}
    t1 = {"role": "trainer", "index": 1, "steps": 100, "seconds": 4.0, "median_s": 0.04}
    r = summarise(("n1", "n2"), {"n1": _printed(server, t1), "n2": _printed(t0)},
                  PsRoundOptions(), 20.0)
    assert r.error is None and not r.failed
    assert [(t.host, t.index, t.steps_per_s) for t in r.trainers] == [("n2", 0, 100.0),
                                                                        ("n1", 1, 25.0)]
    assert [t.wait_share for t in r.trainers] == [0.25, None]  # t1's script said nothing
    assert [t.in_container for t in r.trainers] == [True, None]
    [s] = r.servers
    assert (s.host, s.wall_s, s.cpu_s, s.throttled, s.rx_bytes) == ("n1", 8.0, 2.0, 40, 9000)
    assert abs(s.cores - 0.25) < 1e-9 and abs((s.throttled_s or 0) - 3.0) < 1e-9


def test_a_host_that_failed_is_named_with_its_logs_words():
    r = summarise(("n1", "n2"), {
        "n1": _printed(log="Traceback (most recent call last):\nTypeError: Descriptors "
                           "cannot be created directly", exit=1),
        "n2": _printed({"role": "trainer", "index": 0, "steps": 1, "seconds": 0.1})},
        PsRoundOptions(), 20.0)
    assert r.error == "the job failed on n1"
    assert r.failed == {"n1": "TypeError: Descriptors cannot be created directly"}


def test_a_host_with_no_answer_is_failed_and_a_cut_file_is_not():
    r = summarise(("n1", "n2"), {"n1": Done(0, PS_LINE + '{"role": "tra', "")},
                  PsRoundOptions(timeout=30.0), 40.0)
    assert r.failed == {"n2": "no answer within 40 s"} and r.trainers == ()


def test_each_host_is_said_by_its_part_in_the_plan():
    def ep(h: str, port: int) -> Endpoint:
        return Endpoint(h, "10.0.0.1", port)
    plan = Plan("ps", JobShape(), nodes=(node("n1"), node("n2"), node("n3")),
                servers=(ep("n1", 1), ep("n2", 1)), workers=(ep("n2", 2), ep("n3", 1)))
    assert plan.roles() == {"n1": "server", "n2": "server and trainer", "n3": "trainer"}


# The tail of a host's logs after its `timeout` ended a launcher whose trainer had raised
# (Paddle 2.6.2 on the rig): the signal's report comes last and says nothing of why.
RAISED_THEN_ENDED = """\
  File "/opt/paddle/lib/python3.11/site-packages/paddle/distributed/communicator.py", line 198
ValueError: (InvalidArgument) The Variable type must be N3phi11DenseTensorE, but the type it \
holds is N3phi12SelectedRowsE.
FatalError: `Termination signal` is detected by the operating system.
  [TimeInfo: *** Aborted at 1795589147 (unix time) try "date -d @1795589147" if you are using \
GNU date ***]
  [SignalInfo: *** SIGTERM (@0x1063) received by PID 4209 (TID 0x7f004f8fc040) from PID 4195 ***]
"""


def test_a_rank_that_raised_is_quoted_not_the_signal_that_ended_it():
    r = summarise(("n1",), {"n1": _printed(log=RAISED_THEN_ENDED, exit=124)},
                  PsRoundOptions(), 20.0)
    assert r.failed["n1"].startswith("did not finish within the time limit; log: ValueError: "
                                     "(InvalidArgument) The Variable type must be")
    # A host that died by a signal of its own (no stop, no timeout) still says so.
    r = summarise(("n1",), {"n1": _printed(log=RAISED_THEN_ENDED.splitlines()[-1], exit=1)},
                  PsRoundOptions(), 20.0)
    assert "SIGTERM" in r.failed["n1"]


def test_a_round_that_hung_everywhere_unsaid_is_worth_one_more_run():
    out = "did not finish within the time limit; log: Error Message Summary:"
    hung = PsRound(("n1", "n2"), failed={"n1": out, "n2": out})
    assert hung_without_cause(hung)
    # A host that said why, a peer gloo named, a trainer that finished, a host that answered:
    # each is a cause or a figure, judged as it is.
    assert not hung_without_cause(replace(hung, failed={
        "n1": out, "n2": out + " ValueError: bad table"}))
    assert not hung_without_cause(replace(hung, failed={
        "n1": out, "n2": "RuntimeError: [pair.cc:587] TIMEOUT self_rank = 0 pair_rank = 1 "
                         "peer_str = [10.0.0.1]:36515"}))
    assert not hung_without_cause(replace(hung, trainers=(PsTrainer("n2", 0, 9, 1.0),)))
    # Some hosts stopped with the round, the others out of time, and no trainer finished (as
    # a GEO round was seen: a trainer left at "create c2c connection done"): one more run.
    assert hung_without_cause(replace(hung, failed={
        "n1": "did not finish within the time limit; log: create c2c connection done"}))
