"""`preflight launch` orchestration on this machine (LocalRemote runs the same commands an SSH
host would): streamed output, one failure stops every host, timeout, Ctrl-C, quoting."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

from cgrouptools import alive

from preflight.act import launches
from preflight.act.launch import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    LaunchOptions,
    run,
)
from preflight.model.plan import Node
from preflight.transport.local.run import LocalRemote


def shell_node(host: str, body: str) -> Node:
    """A node whose 'launcher' is a shell running body; the script args follow as $1.."""
    return Node(host, "127.0.0.1", "sh", 0, 1, (), ("sh", "-c", body, host), ())


def pids_in(path: str) -> list[int]:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if os.path.exists(path) and open(path).read().strip():
            return [int(x) for x in open(path).read().split()]
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def launch(nodes, opts, **kw):
    out, err = io.StringIO(), io.StringIO()
    remotes = {n.host: LocalRemote(n.host) for n in nodes}
    code = run(nodes, remotes, opts, out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def test_output_is_streamed_under_each_host_name():
    nodes = [shell_node("a", 'echo "hello from $0 $1"; echo to-stderr >&2'),
             shell_node("bb", 'printf "no newline at the end"')]
    code, out, err = launch(nodes, LaunchOptions(("train.py",)))
    assert code == EXIT_OK, err
    lines = sorted(out.splitlines())
    assert lines == ["a  | hello from a train.py", "a  | to-stderr",
                     "bb | no newline at the end"]


def test_one_failing_host_stops_the_job_everywhere(tmp_path):
    pidfile = tmp_path / "pids"
    runs_s = 60  # how long the other host's job would run if nothing stopped it
    nodes = [shell_node("fails", "sleep 0.5; echo boom; exit 3"),
             shell_node("runs", f"sleep {runs_s} & echo $! >> {pidfile}; (setsid sleep "
                        f"{runs_s} & echo $! >> {pidfile}); wait")]
    started = time.monotonic()
    code, out, err = launch(nodes, LaunchOptions(("train.py",)))
    assert code == EXIT_FAILED and time.monotonic() - started < runs_s / 4
    assert "fails | boom" in out
    assert "preflight launch: fails failed (exit 3): stopping the job on every host" in err
    pids = pids_in(str(pidfile))
    assert len(pids) == 2
    end = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    # Both sleeps are gone, also the one in its own session (found by the job's marker).
    assert not any(alive(p) for p in pids)


def test_the_host_that_failed_is_kept_in_the_launch_record_for_the_watch(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    plan = str(tmp_path / "report.json")
    nodes = [shell_node("fails", "sleep 0.5; exit 247"), shell_node("runs", "sleep 60")]
    code, _, err = launch(nodes, LaunchOptions(("train.py",), plan=plan))
    assert code == EXIT_FAILED, err
    launched = launches.newest(plan)
    # The host the launch stopped after it exited non-zero too: only the first is the cause.
    assert launched is not None and launched.failed is not None
    assert (launched.failed.host, launched.failed.why) == ("fails", "exit 247")


def test_timeout_stops_the_job(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("slow", f"sleep 60 & echo $! > {pidfile}; wait")]
    code, _, err = launch(nodes, LaunchOptions(("x",), timeout=1.0))
    assert code == EXIT_TIMEOUT and "still running after 1 s" in err
    assert not alive(pids_in(str(pidfile))[0])


def test_ctrl_c_stops_the_job(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("a", f"sleep 60 & echo $! > {pidfile}; wait")]
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    # Python's own Ctrl-C, whatever this run inherited (a background job ignores SIGINT).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        code, _, err = launch(nodes, LaunchOptions(("x",)))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    assert code == EXIT_INTERRUPTED and "interrupted" in err
    assert not alive(pids_in(str(pidfile))[0])


def test_script_arguments_never_reach_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    nodes = [shell_node("a", 'printf "%s\\n" "$@"')]
    hostile = (f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", "-oX'\"")
    code, out, _ = launch(nodes, LaunchOptions(hostile))
    assert code == EXIT_OK and not marker.exists()
    assert [ln.split(" | ", 1)[1] for ln in out.splitlines()] == list(hostile)


def test_chdir_that_does_not_exist_fails_the_host(tmp_path):
    code, _, err = launch([shell_node("a", "true")],
                          LaunchOptions(("x",), chdir=str(tmp_path / "nope")))
    assert code == EXIT_FAILED and "could not enter --chdir" in err


class _Refuses:
    name = "b"

    def start(self, command):
        raise OSError("channel refused")

    def run(self, command, timeout):
        return LocalRemote("b").run("echo stopped 0", timeout)


class _SlowToExec(LocalRemote):
    """A host whose command reaches the marked launcher a second after it started (a loaded
    machine, a slow login shell): a stop that looks at once finds nothing marked there."""

    def start(self, command):
        return super().start(f"sleep 1; {command}")


def test_a_host_still_starting_when_the_job_is_stopped_is_stopped_too(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("a", f"sleep 60 & echo $! > {pidfile}; wait"), shell_node("b", "true")]
    err = io.StringIO()
    code = run(nodes, {"a": _SlowToExec("a"), "b": _Refuses()}, LaunchOptions(("x",)),
               out=io.StringIO(), err=err)
    assert code == EXIT_FAILED
    pids = [int(x) for x in pidfile.read_text().split()]  # it did start, after the stop
    assert pids and not any(alive(p) for p in pids)


def test_a_host_that_cannot_start_stops_the_others(tmp_path):
    pidfile = tmp_path / "pids"
    nodes = [shell_node("a", f"sleep 60 & echo $! > {pidfile}; wait"), shell_node("b", "true")]
    err = io.StringIO()
    code = run(nodes, {"a": LocalRemote("a"), "b": _Refuses()}, LaunchOptions(("x",)),
               out=io.StringIO(), err=err)
    assert code == EXIT_FAILED
    assert "b: could not start: OSError: channel refused" in err.getvalue()
    # a may have been stopped before it wrote its pid; if it did, that sleep is gone.
    pids = [int(x) for x in pidfile.read_text().split()] if pidfile.exists() else []
    assert not any(alive(p) for p in pids)
