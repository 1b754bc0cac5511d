"""The all-reduce's host commands run on this machine: hostile interpreters never run, the stop
command kills the run's processes and not itself."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time

import pytest
from support import HOSTILE

from preflight.common.nccllog import transport
from preflight.model.container import ContainerSpec
from preflight.network import allreduce_cmd as C
from preflight.network import allreduce_log as L
from preflight.network import paddle_job as J
from preflight.network.allreduce import run_allreduce
from preflight.network.allreduce_cmd import AllReduceOptions
from preflight.network.paddle_job import Member
from preflight.testing import testbed
from preflight.transport.local.run import LocalRemote


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_interpreter_never_runs_in_the_launch_command(tmp_path, value):
    marker = tmp_path / "marker"
    m = J.Member("n", LocalRemote("n"), value.format(m=marker), "127.0.0.1")
    run_dir = str(tmp_path / ".preflight-ar-test")
    done = LocalRemote("n").run(C.host_command(m, 0, [m], C.AllReduceOptions(), run_dir),
                                timeout=20)
    assert not marker.exists()
    assert done.exit == 95  # no such interpreter: the unpack step stops the command


def test_stop_command_kills_the_runs_processes_and_not_itself(tmp_path):
    run_dir = str(tmp_path / ".preflight-ar-0123abcd")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    # As the launcher and its ranks end their command lines; the host command's shell holds
    # the run directory mid-line.
    victim = subprocess.Popen([*sleep, f"{run_dir}/allreduce.py", "--dir", run_dir])
    bystander = subprocess.Popen([*sleep, "--dir", f"{run_dir}-other"])
    shell = subprocess.Popen([*sleep, f"{run_dir}/allreduce.py --dir {run_dir} > log"])
    try:
        done = LocalRemote("n").run(J.stop_command(run_dir), timeout=10)
        assert done.exit == 0  # the stopping shell survived its own pattern
        assert victim.wait(5) is not None
        assert bystander.poll() is None and shell.poll() is None
    finally:
        for p in (victim, bystander, shell):
            p.kill()
            p.wait()


def test_inside_a_running_container_the_stop_and_cleanup_need_only_its_python(
        tmp_path, monkeypatch):
    # A runtime whose exec runs the command here, on a PATH with no pkill: what a job's
    # image without procps gives the stop and the cleanup inside a running container.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runtime = bin_dir / "podman"
    runtime.write_text('#!/bin/sh\n[ "$1" = exec ] || exit 99\nshift 2\nexec "$@"\n')
    runtime.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    box = ContainerSpec("podman", name="trainer", python=sys.executable)
    m = J.Member("n", LocalRemote("n"), sys.executable, "127.0.0.1", container=box)
    run_dir = str(tmp_path / ".preflight-ar-0badcafe-1")
    os.makedirs(f"{run_dir}/log")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    victim = subprocess.Popen([*sleep, f"{run_dir}/allreduce.py", "--dir", run_dir])
    bystander = subprocess.Popen([*sleep, "--dir", f"{run_dir}-other"])
    shell = subprocess.Popen([*sleep, f"{run_dir}/allreduce.py --dir {run_dir} > log"])
    try:
        assert J.member_stop(m, run_dir).startswith("podman exec trainer ")
        assert LocalRemote("n").run(J.member_stop(m, run_dir), timeout=10).exit == 0
        assert victim.wait(5) is not None
        assert bystander.poll() is None and shell.poll() is None
        assert LocalRemote("n").run(J.member_cleanup(m, run_dir), timeout=10).exit == 0
        assert shell.wait(5) is not None and bystander.poll() is None
        assert not os.path.exists(run_dir)
    finally:
        for p in (victim, bystander, shell):
            p.kill()
            p.wait()


def test_a_stopped_host_command_still_prints_its_log(tmp_path):
    # A launcher that never gets anywhere, as one waiting on an unreachable master does,
    # after saying why in its log. Stopped, the host command's shell outlives it: its log's
    # tail is what the finding quotes ("its log last said").
    wrapper = tmp_path / "python"
    wrapper.write_text(
        '#!/bin/sh\nif [ "$2" = paddle.distributed.launch ]; then\n'
        '  echo "waiting for the master at 10.9.9.9:36000: connection refused" >&2\n'
        f'  exec {sys.executable} -c "import time; time.sleep(60)" "$@"\nfi\n'
        f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    m = J.Member("n", LocalRemote("n"), str(wrapper), "127.0.0.1")
    run_dir = str(tmp_path / ".preflight-ar-5ca1ab1e-0")
    proc = LocalRemote("n").start(C.host_command(m, 0, [m], C.AllReduceOptions(), run_dir))
    try:
        log = os.path.join(run_dir, "launch.log")
        for _ in range(200):  # until the launcher has said its line: 20 s at most
            if os.path.exists(log) and "refused" in open(log).read():
                break
            time.sleep(0.1)
        else:
            pytest.fail("the stand-in launcher never started")
        assert LocalRemote("n").run(J.stop_command(run_dir), timeout=10).exit == 0
        done = proc.wait(15)
        # Its own exit status (the launcher's TERM, passed on by `timeout`), not a signal's.
        assert done.exit is not None and done.exit > 0, done
        assert f"{J.LOG}waiting for the master at 10.9.9.9:36000: connection refused" \
            in done.stdout.splitlines(), done
        assert L.log_reason(done) == ("waiting for the master at 10.9.9.9:36000: "
                                       "connection refused")
    finally:
        proc.close()


@pytest.mark.parametrize("version", ["3.3.1", "2.6.2"])
def test_a_one_rank_all_reduce_runs_and_says_nothing_crossed_a_link(version):
    # With world size 1, init_parallel_env makes no group and all_reduce raises "The global
    # group is not initialized" (2.6.2 and 3.3.1): one rank reduces with nobody, so the
    # script times the identity the collective would be, and the run ends cleanly.
    python = testbed.paddle_python(version)
    if not os.access(python, os.X_OK):
        pytest.fail(f"{python} missing: run scripts/setup.sh")
    member = Member("local", LocalRemote("local"), python, "127.0.0.1", nproc=1)
    r = run_allreduce([member], "gloo", AllReduceOptions(port=free_port(), sizes_mib=(1.0,),
                                                         iters=2, timeout=120))
    assert r.error is None, (r.error, dict(r.failed))
    assert r.ranks == 1 and [s.nbytes for s in r.sizes] == [1 << 20]


def test_the_host_prints_nccls_choice_of_network_once_whatever_the_ranks(tmp_path):
    # Worker logs as NCCL 2.x writes them with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET:
    # every rank repeats the same lines behind its own host:pid:tid [rank] prefix.
    run_dir = tmp_path / ".preflight-ar-feedbeef"
    (run_dir / "log").mkdir(parents=True)
    for rank in range(8):
        p = f"gpu01:{4100 + rank}:{4100 + rank} [{rank}] NCCL INFO "
        lines = [f"{p}Bootstrap : Using eth0:10.0.0.1<0>"]
        lines += [f"{p}NET/Plugin : Plugin load (libnccl-net.so) returned 2 : try {n}"
                  for n in range(8)]  # a long list of attempts must not push out the choice
        lines += [f"{p}NET/IB : No device found.", f"{p}NET/Socket : Using [0]eth0:10.0.0.1<0>",
                  f"{p}Using network Socket", f"{p}comm 0x55 rank {rank} nranks 8 - Init COMPLETE"]
        (run_dir / "log" / f"workerlog.{rank}").write_text("\n".join(lines) + "\n")
    done = LocalRemote("n").run("sh -c " + shlex.quote(C.hints_script(str(run_dir))),
                                timeout=10)
    hints = [ln[len(C.HINT):] for ln in done.stdout.splitlines()]
    assert hints[0] == "Using network Socket"
    assert len(hints) == len(set(hints)) <= 8 and not any("Bootstrap" in h for h in hints)
    assert transport("; ".join(hints)) == "Socket"


HOLDER = """\
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[2])))
s.listen(8)
print("up", flush=True)
time.sleep(float(sys.argv[3]))
"""


def hold(tmp_path, port: int, seconds: float) -> subprocess.Popen[str]:
    """A process listening on the port for that long (what a job's master left running, or
    a listener not yet gone, is to the next launcher); a secret in its command line."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    p = subprocess.Popen([sys.executable, str(script), "api_token=hunter2", str(port),
                          str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "up\n"
    return p


def launch_recorder(tmp_path) -> str:
    """A python that records it was asked to run Paddle's launcher, and runs the rest."""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        '#!/bin/sh\nif [ "$2" = paddle.distributed.launch ]; then\n'
        f'  echo launched > {shlex.quote(str(tmp_path / "launched"))}; exit 0\nfi\n'
        f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_a_master_port_taken_before_the_launch_is_named_and_nothing_is_launched(tmp_path):
    port = free_port()
    holder = hold(tmp_path, port, 60)
    try:
        m = J.Member("n", LocalRemote("n"), launch_recorder(tmp_path), "127.0.0.1")
        peer = J.Member("p", LocalRemote("p"), launch_recorder(tmp_path), "127.0.0.2")
        run_dir = str(tmp_path / ".preflight-ar-0fa57e11-0")
        done = LocalRemote("n").run(C.host_command(m, 0, [m, peer], C.AllReduceOptions(
            port=port), run_dir), timeout=30)
        assert done.exit == C.HELD_EXIT, done
        assert not (tmp_path / "launched").exists()  # it would have waited for ever
        why = L.log_reason(done)
        assert why.startswith(f"port {port}, the job's master, was taken before its launcher "
                              f"started (pid {holder.pid}: {sys.executable} "), why
        assert "api_token=***" in why and "hunter2" not in why, why
        assert why.endswith("every launcher waits for peers that never come"), why
    finally:
        holder.kill()
        holder.wait()


def test_a_master_port_let_go_within_the_wait_is_launched_and_other_ranks_never_wait(
        tmp_path):
    port = free_port()
    holder = hold(tmp_path, port, 1.5)  # a listener on its way out
    try:
        m = J.Member("n", LocalRemote("n"), launch_recorder(tmp_path), "127.0.0.1")
        run_dir = str(tmp_path / ".preflight-ar-0fa57e11-0")
        done = LocalRemote("n").run(C.host_command(m, 0, [m, m], C.AllReduceOptions(
            port=port), run_dir), timeout=30)
        assert done.exit != C.HELD_EXIT and (tmp_path / "launched").exists(), done
    finally:
        holder.kill()
        holder.wait()
    # Only the master's host checks the port: rank 1 launches though the port is taken.
    (tmp_path / "launched").unlink()
    holder = hold(tmp_path, port, 60)
    try:
        done = LocalRemote("n").run(C.host_command(m, 1, [m, m], C.AllReduceOptions(
            port=port), str(tmp_path / ".preflight-ar-0fa57e11-1")), timeout=30)
        assert done.exit != C.HELD_EXIT and (tmp_path / "launched").exists(), done
    finally:
        holder.kill()
        holder.wait()
