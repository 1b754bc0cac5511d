"""An all-reduce's outcome from what each host printed and what the controller saw: the
culprit, a rank that never joined or stopped, a slow run cut with its finished sizes, a stall
with nobody to blame, rank 0's results, the log line that says why (secrets redacted)."""

from __future__ import annotations

import json

import pytest

from preflight.common.remote import Done
from preflight.network import allreduce_cmd as C
from preflight.network import allreduce_log as L
from preflight.network import allreduce_outcome as O
from preflight.network import allreduce_watch as W
from preflight.network import paddle_job as J
from preflight.network import progress as P
from preflight.transport.local.run import LocalRemote

MIB = 1 << 20


def members(names):
    return [J.Member(n, LocalRemote(n), "python3", "10.0.0.1") for n in names]


def status(now, *ranks, waiting=True):
    """What status_script prints: ranks are (local, [events], beat time)."""
    out = [f"{P.NOW}{now}"] + ([P.LAUNCHER] if waiting else [])
    for local, events, beat in ranks:
        out += [f"{P.PROGRESS}{local} {json.dumps(ev)}" for ev in events]
        if beat is not None:
            out.append(f"{P.BEAT}{local} {beat}")
    return "\n".join(out) + "\n"


def joined(rank, world=2, ops=0, sizes=(), done=False, t=100.0):
    evs = [{"e": "start", "t": t - 10, "pid": 1}, {"e": "init", "t": t - 5},
           {"e": "join", "t": t, "rank": rank, "world": world, "backend": "gloo"}]
    evs += [{"e": "op", "n": i + 1, "t": t + i + 1} for i in range(ops)]
    evs += [{"e": "size", "bytes": b, "seconds": s, "t": t + ops} for b, s in sizes]
    return evs + ([{"e": "done", "t": t + ops + 1}] if done else [])


def summarise(names, results, ended, watch=None, **opts):
    w = watch or W.Watch({n: None for n in names})
    return O.summarise(members(names), "gloo", len(names), tuple(names), results, ended,
                         C.AllReduceOptions(**opts), 1.0, w)


def test_log_reason_quotes_the_error_line_and_redacts_secrets():
    out = "\n".join(J.LOG + ln for ln in [
        "LAUNCH INFO 2026 job started", "I1121 tcp_utils.cc:132] connected",
        "Traceback (most recent call last):", "  File x.py, line 4",
        "RuntimeError: connect refused with API_TOKEN=abc123 set"])
    why = L.log_reason(Done(1, out, ""))
    assert why == "RuntimeError: connect refused with API_TOKEN=*** set"


def test_a_rank_that_aborted_is_quoted_with_why_not_with_paddles_banner():
    out = "\n".join(J.LOG + ln for ln in [
        "terminate called after throwing an instance of 'std::runtime_error'",
        "  what():  connect to 10.0.0.2:6070 failed: Connection refused",
        "Error Message Summary:",
        "FatalError: `Process abort signal` is detected by the operating system.",
        "  [TimeInfo: *** Aborted at 1795700435 (unix time) try \"date -d @1795700435\" if "
        "you are using GNU date ***]",
        "  [SignalInfo: *** SIGABRT (@0x0) received by PID 42 (TID 0x7f) from PID 42 ***]"])
    assert L.log_reason(Done(134, out, "")) == (
        "what():  connect to 10.0.0.2:6070 failed: Connection refused")
    # The banner alone still says that it aborted.
    banner = "\n".join(out.splitlines()[2:])
    assert L.log_reason(Done(134, banner, "")).startswith("[TimeInfo: *** Aborted at")


@pytest.mark.parametrize("report", ["Terminated", "Killed",
                                    "sh: line 1:  4242 Terminated   timeout -k 3 630 env"])
def test_a_stopped_hosts_log_is_quoted_without_the_shells_report_of_the_stop(report):
    # Its launcher stopped by the run: the shell's report of that signal is the run's doing.
    out = "\n".join(J.LOG + ln for ln in ["waiting for the master: no route to host",
                                             report])
    assert L.log_reason(Done(143, out, ""), stopped=True) == (
        "waiting for the master: no route to host")
    assert L.log_of(Done(143, J.LOG + report + "\n", "")) == ""
    # A rank that failed by itself keeps it: a Killed there is the host's (its OOM killer).
    assert L.log_reason(Done(137, out, "")) == report


def test_a_stopped_host_with_only_launcher_lines_says_how_far_its_launcher_got():
    # Its launcher hung before the rendezvous: its last line says in which step.
    out = "".join(J.LOG + ln + "\n" for ln in [
        "LAUNCH INFO 2026-11-24 19:29:09,043 master: 10.0.0.1:36000",
        "LAUNCH INFO 2026-11-24 19:29:09,044 token=s3cr3t job_id  preflight",
        "LAUNCH INFO 2026-11-24 19:29:09,044 -----------------------------------------", "",
        "Terminated"])
    assert L.log_of(Done(143, out, "")) == (
        "; its launcher last said: token=*** job_id  preflight")
    # Lines of its own come first; nothing at all says nothing.
    assert L.log_of(Done(143, out + J.LOG + "no route to host\n", "")) == (
        "; its log last said: no route to host")
    assert L.log_of(Done(143, "", "")) == "" and L.log_of(None) == ""


def test_first_failing_rank_is_the_culprit_and_the_rest_were_stopped():
    results = {"b": Done(1, J.LOG + "RuntimeError: Unable to find address for: nope0", ""),
               "a": Done(-15, "", ""), "c": Done(-15, "", "")}
    r = summarise("abc", results, ["b"], watch=W.Watch({}, kind="failed"))
    assert r.failed == {"b": "RuntimeError: Unable to find address for: nope0"}
    assert r.error == "the rank on b failed first; stopped the launcher on a, c"
    assert r.outcome == "failed"


def test_a_master_port_taken_before_the_launch_makes_its_host_the_culprit():
    held = f"{C.HELD}6767 pid 4242: python3 -c import select, socket, sys, time\n"
    results = {"a": Done(C.HELD_EXIT, held, ""), "b": Done(-15, "", ""), "c": Done(-15, "", "")}
    r = summarise("abc", results, ["a"], watch=W.Watch({}, kind="failed"), port=6767)
    assert r.error == "the rank on a failed first; stopped the launcher on b, c"
    assert r.failed == {"a": "port 6767, the job's master, was taken before its launcher "
                        "started (pid 4242: python3 -c import select, socket, sys, time): "
                        "Paddle's launcher takes whatever answers there for its master, and "
                        "every launcher waits for peers that never come"}
    # Without its line (cut off), the exit alone says nothing: the output's tail is quoted.
    assert L.log_reason(Done(C.HELD_EXIT, "", "sh: 1: cannot fork")) == "sh: 1: cannot fork"


def test_results_come_from_rank_zero_and_every_host_says_what_it_did():
    one = [(MIB, 0.01)]
    out_a = status(130, ("0", joined(0, ops=6, sizes=one, done=True), 129.5)) + \
        C.HINT + "NCCL INFO NET/Socket : Using eth0\n"
    out_b = status(130, ("0", joined(1, ops=6, sizes=[(MIB, 0.02)], done=True), 129.5))
    r = summarise("ab", {"a": Done(0, out_a, ""), "b": Done(0, out_b, "")}, ["a", "b"])
    assert r.error is None and r.ranks == 2 and r.outcome == "done" and r.certified
    assert r.logs == {"a": "NCCL INFO NET/Socket : Using eth0"}
    [size] = r.sizes
    assert size.nbytes == MIB and size.busbw == pytest.approx(MIB / 0.01)
    assert r.progress == {"a": "joined; 6 collective(s) done; finished",
                          "b": "joined; 6 collective(s) done; finished"}


def test_a_finished_host_whose_connection_went_before_its_exit_status_passes():
    # b's ranks had finished by the last progress read from it; then its SSH connection
    # went (paramiko's -1). The measurement is whole: no failure, and the hint says so.
    one = [(MIB, 0.01)]
    out_a = status(130, ("0", joined(0, ops=6, sizes=one, done=True), 129.5))
    b_seen = P.parse_status(status(129, ("0", joined(1, ops=6, sizes=one, done=True), 128.5)))
    lost = Done(-1, "", "\n(the SSH connection to the host was lost: the host closed it)")
    r = summarise("ab", {"a": Done(0, out_a, ""), "b": lost}, ["a", "b"],
                  watch=W.Watch({"a": None, "b": b_seen}))
    assert r.error is None and r.outcome == "done" and r.sizes, r
    assert "the SSH connection went before the exit status came" in r.logs["b"]
    # Before its ranks finished, the same loss is the host's failure.
    b_seen = P.parse_status(status(129, ("0", joined(1, ops=3, sizes=()), 128.5)))
    r = summarise("ab", {"a": Done(0, out_a, ""), "b": lost}, ["a", "b"],
                  watch=W.Watch({"a": None, "b": b_seen}))
    assert r.outcome == "failed" and "connection to the host was lost" in r.failed["b"], r


def test_a_host_behind_the_others_when_the_launch_stops_progressing_never_joined():
    # b's launcher never printed that it waits for peers; a's did: b kept a waiting.
    progress = {"a": P.parse_status(status(50)), "b": P.parse_status(status(50, waiting=False))}
    w = W.Watch(progress)
    w.moved({"a": 1, "b": 1}, 0.0)
    assert W.decide(w, {"a": 1, "b": 1}, C.AllReduceOptions(launch_idle_s=40), 41.0, None)
    assert w.kind == "never-joined" and list(w.named) == ["b"]
    results = {"a": Done(-15, "", ""), "b": Done(-15, J.LOG + "sleeping", "")}
    r = summarise("ab", results, [], watch=w)
    assert r.outcome == "never-joined" and list(r.failed) == ["b"]
    assert r.failed["b"].startswith("never joined the rendezvous: its launcher never reached")
    assert r.error == ("b never joined the rendezvous: nothing progressed for 41 s (41 s after "
                       "the launch); a waited for it: stopped")


def test_before_the_launch_stops_progressing_nobody_is_blamed():
    progress = {"a": P.parse_status(status(50)), "b": P.parse_status(status(50, waiting=False))}
    w = W.Watch(progress)
    assert not W.decide(w, {"a": 1, "b": 1}, C.AllReduceOptions(), 29.0, None)
    assert w.kind == "ended"


def at_rendezvous(now, sockets):
    """A host whose one rank imported Paddle and waits at the rendezvous, sockets connected."""
    evs = [{"e": "start", "t": 10.0, "pid": 1}, {"e": "init", "t": 20.0}]
    return P.parse_status(status(now, ("0", evs, f"{now} {sockets}")))


def test_a_rendezvous_connecting_its_mesh_is_progress_however_long_it_takes():
    # gloo connects a full mesh pair by pair through rank 0's store, each pair one more
    # connection: however long that takes on a large cluster, it is not a stall.
    nproc = {"a": 1, "b": 1}
    w = W.Watch({"a": at_rendezvous(100, 5), "b": at_rendezvous(100, 5)})
    w.moved(nproc, 30.0)
    for elapsed, sockets in ((60.0, 9), (90.0, 14), (120.0, 20)):
        w.progress = {"a": at_rendezvous(100 + elapsed, sockets), "b": at_rendezvous(100, 5)}
        w.moved(nproc, elapsed)
        assert not W.decide(w, nproc, C.AllReduceOptions(launch_idle_s=40, timeout=600),
                              elapsed + 1, None), elapsed
    assert w.moved_at == 120.0
    # A count that only comes and goes (a connection retried) is no progress: fewer sockets.
    w.progress = {"a": at_rendezvous(250, 17), "b": at_rendezvous(250, 5)}
    w.moved(nproc, 170.0)
    assert w.moved_at == 120.0
    assert W.decide(w, nproc, C.AllReduceOptions(launch_idle_s=40, timeout=600), 170.0, None)
    assert w.kind == "stall" and not w.named  # everyone at the rendezvous: nobody behind
    r = summarise("ab", {}, [], watch=w)
    assert r.outcome == "stall" and "no rank progressed towards the rendezvous for 50 s" in (
        r.error or "")


def test_a_run_at_its_own_time_limit_while_progressing_blames_nobody():
    nproc = {"a": 1, "b": 1}
    w = W.Watch({"a": at_rendezvous(100, 5), "b": at_rendezvous(100, 5)})
    w.moved(nproc, 115.0)
    assert W.decide(w, nproc, C.AllReduceOptions(launch_idle_s=40, timeout=120), 120.0, None)
    assert w.kind == "out-of-time"
    r = summarise("ab", {}, [], watch=w, timeout=120)
    assert r.outcome == "out-of-time" and not r.failed
    assert r.error == ("ran out of its 120 s time limit while the ranks still progressed (0 of "
                       "2 hosts had joined the rendezvous, the last progress 5 s before): "
                       "nothing to blame on the cluster; give it more time with "
                       "--allreduce-timeout")


def test_a_rank_whose_heartbeat_stopped_is_named_alone():
    # Both joined and did 3 collectives; b's heartbeat is 30 s old, a's is fresh: a waits on b.
    progress = {"a": P.parse_status(status(200, ("0", joined(0, ops=3), 199.5))),
                "b": P.parse_status(status(200, ("0", joined(1, ops=3), 170.0)))}
    w = W.Watch(progress)
    assert W.decide(w, {"a": 1, "b": 1}, C.AllReduceOptions(), 20.0, 12.0)
    assert w.kind == "stalled" and list(w.named) == ["b"]
    assert "no heartbeat for 30 s after 3 collective(s)" in w.named["b"]
    r = summarise("ab", {}, [], watch=w)
    assert r.outcome == "stalled" and list(r.failed) == ["b"]


def test_every_heartbeat_stale_blames_nobody():
    progress = {h: P.parse_status(status(200, ("0", joined(i, ops=3), 170.0)))
                for i, h in enumerate("ab")}
    assert P.stale(progress) == {}


def test_progress_at_the_deadline_is_slow_and_keeps_the_sizes_that_finished():
    # Collectives still complete (the last 2 s ago) when the 30 s after the join are up.
    ev = joined(0, ops=8, sizes=[(MIB, 0.5)], t=100.0)
    progress = {"a": P.parse_status(status(110, ("0", ev, 109.8))),
                "b": P.parse_status(status(110, ("0", joined(1, ops=8, t=100.0), 109.8)))}
    w = W.Watch(progress)
    opts = C.AllReduceOptions(collective_s=30.0)
    assert not W.decide(w, {"a": 1, "b": 1}, opts, 35.0, 10.0)
    assert W.decide(w, {"a": 1, "b": 1}, opts, 41.0, 10.0)
    assert w.kind == "slow" and w.deadline_s == 40.0 and w.idle_s == pytest.approx(2.0)
    r = summarise("ab", {}, [], watch=w, collective_s=30.0)
    assert r.outcome == "slow" and r.error is None and not r.certified
    assert [s.nbytes for s in r.sizes] == [MIB]
    assert r.cut.startswith("cut at its 40 s deadline while collectives still completed")


def test_nothing_completing_and_nobody_behind_is_a_stall_of_the_cluster():
    progress = {h: P.parse_status(status(200, ("0", joined(i, ops=2, t=100.0), 199.5)))
                for i, h in enumerate("ab")}
    w = W.Watch(progress)
    assert W.decide(w, {"a": 1, "b": 1}, C.AllReduceOptions(collective_s=30.0), 45.0,
                      10.0)
    assert w.kind == "stall" and w.named == {}
    r = summarise("ab", {}, [], watch=w)
    assert r.outcome == "stall" and r.failed == {}
    assert "no collective completed in the last 98 s" in r.error


def test_a_launch_where_every_host_is_equally_stuck_is_a_stall():
    progress = {h: P.parse_status(status(50)) for h in "ab"}  # both launchers wait
    w = W.Watch(progress)
    assert W.decide(w, {"a": 1, "b": 1}, C.AllReduceOptions(), 61.0, None)
    assert w.kind == "stall" and w.named == {}


def test_the_hosts_own_timeout_is_never_a_success():
    out = status(130, ("0", joined(0, ops=2, sizes=[(MIB, 0.01)]), 129.0))
    r = summarise("ab", {"a": Done(124, out, ""), "b": Done(124, "", "")}, ["a", "b"])
    assert r.outcome == "stall" and r.error and r.failed == {}


def test_a_rank_importing_paddle_is_not_judged_by_its_heartbeat():
    # Loading Paddle's libraries holds the GIL: on a loaded host b's beat thread went
    # unscheduled for 30 s while a already beat at the rendezvous. That is no stop; the
    # launch's own progress decides (never joined), after its idle time, not at once.
    importing = [{"e": "start", "t": 160.0, "pid": 1}]
    progress = {"a": at_rendezvous(200, 1),
                "b": P.parse_status(status(200, ("0", importing, 170.0)))}
    assert P.stale(progress) == {}
    nproc = {"a": 1, "b": 1}
    w = W.Watch(progress)
    w.moved(nproc, 20.0)
    opts = C.AllReduceOptions(launch_idle_s=40, timeout=600)
    assert not W.decide(w, nproc, opts, 30.0, None)
    assert W.decide(w, nproc, opts, 61.0, None)
    assert w.kind == "never-joined" and list(w.named) == ["b"]
    assert "importing Paddle" in w.named["b"]
    # At the rendezvous, where Paddle releases the GIL, a silent heartbeat is a stop.
    progress["b"] = P.parse_status(status(200, ("0", [*importing, {"e": "init", "t": 165.0}],
                                                170.0)))
    assert list(P.stale(progress)) == ["b"]
    assert "at the rendezvous" in P.stale(progress)["b"]
