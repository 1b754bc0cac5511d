"""The real sampler and `preflight watch` on this machine, against a stand-in for Paddle's
launcher (a module run as python -m paddle.distributed.launch that starts two ranks with
Paddle's variables, their output in workerlog.N, one of them calling the step hook): what
the sampler finds, and what the watch says of a stopped rank."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cgrouptools import frozen
from support import procs_with_env

from preflight.hostside import sampler_gpu as G
from preflight.testing import standin
from preflight.watch import sampler_text

LAUNCHER = '''\
import os, subprocess, sys, time
log = sys.argv[sys.argv.index("--log_dir") + 1]
os.makedirs(log, exist_ok=True)
procs = []
for i in range(2):
    env = dict(os.environ, PADDLE_TRAINER_ID=str(i), PADDLE_TRAINERS_NUM="2",
               FLAGS_selected_gpus=str(i))
    out = open(os.path.join(log, "workerlog.%d" % i), "w")
    argv = [sys.executable, sys.argv[-1], str(i)]
    if i == 1:  # through a shell that does not exec it, as a launcher runs a .sh script
        argv = ["sh", "-c", '"$@"; true', "sh"] + argv
    procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT))
end = time.time() + 60
while time.time() < end:  # a rank that dies is reaped; the others run on
    time.sleep(0.1)
    [p.poll() for p in procs]
for p in procs:
    p.kill()
'''

RANK = '''\
import subprocess, sys, time
rank = int(sys.argv[1])
if rank == 0:
    from preflight.watch import step
else:  # a worker of its own (a DataLoader's), with its variables: part of the rank
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
for n in range(100000):
    time.sleep(0.02)
    if rank == 0:
        step()
    if n % 5 == 0:
        print("step %d loss 0.1" % n, flush=True)
    if rank == 1 and n % 10 == 0:  # a short-lived helper, come and gone between samples
        subprocess.Popen(["sleep", "0.3"])
'''


def stand_in(tmp_path: Path, rank: str = RANK) -> dict[str, str]:
    """Writes the stand-in launcher and rank under tmp_path; the environment that runs them
    (with the launch marker PREFLIGHT_LAUNCH=tok-watch)."""
    (tmp_path / "rank.py").write_text(rank)
    fake = standin.paddle_launcher(tmp_path / "fake", LAUNCHER)
    env = dict(os.environ, PYTHONPATH=str(fake), PREFLIGHT_LAUNCH="tok-watch",
               PREFLIGHT_WATCH_DIR=str(tmp_path))
    env.pop("PYTHONSAFEPATH", None)
    return env


@pytest.fixture
def job(tmp_path: Path, request: pytest.FixtureRequest):
    """A stand-in job with the launch marker PREFLIGHT_LAUNCH=tok-watch; its processes.
    Parametrized indirectly, the source of its ranks."""
    env = stand_in(tmp_path, getattr(request, "param", RANK))
    launcher = subprocess.Popen([sys.executable, "-m", "paddle.distributed.launch",
                                 "--log_dir", str(tmp_path / "log"), str(tmp_path / "rank.py")],
                                env=env, cwd=tmp_path, start_new_session=True)
    try:
        end = time.monotonic() + 20
        ranks: list[int] = []
        while time.monotonic() < end and len(ranks) < 2:
            time.sleep(0.1)
            ranks = [int(p) for p in subprocess.run(  # the ranks, not the shell around one
                ["pgrep", "-f", "^" + re.escape(sys.executable) + " .*rank.py [01]$"],
                capture_output=True, text=True).stdout.split()]
        assert len(ranks) == 2, "the stand-in job did not start its two ranks"
        yield launcher.pid, sorted(ranks), tmp_path
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(10)


def sample(token: str, seconds: float = 1.2, interval: float = 0.5, gpu: str = "driver",
           env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    cmd = sampler_text.command(sys.executable, sampler_text.SamplerOptions(
        interval, seconds, token, gpu=gpu))
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30, env=env)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert lines, f"the sampler printed no sample in {seconds} s: {p.stderr[-2000:]}"
    return lines


def test_the_sampler_finds_the_job_its_ranks_their_logs_and_the_hook(job):
    launcher, ranks, tmp = job
    lines = sample("tok-watch")
    assert len(lines) >= 3
    first, last = lines[0], lines[-1]
    (j,) = first["jobs"]
    assert j["pid"] == launcher and j["log_dir"] == str(tmp / "log")
    assert j["netns"].startswith("net:[")
    by_pid = {r["pid"]: r for r in j["ranks"]}
    assert sorted(by_pid) == ranks
    whos = sorted(r["who"]["PADDLE_TRAINER_ID"] for r in by_pid.values())
    assert whos == ["0", "1"]
    assert "argv" not in last["jobs"][0]  # said once
    assert all("who" not in r for r in last["jobs"][0]["ranks"])
    for r0, r1 in zip(j["ranks"], last["jobs"][0]["ranks"]):
        assert r1["log"]["path"].startswith(str(tmp / "log" / "workerlog."))
        assert r1["log"]["steps"] > r0["log"]["steps"]  # step lines counted as they come
        assert r1["log"]["size"] > r0["log"]["size"]
    hooks = [r["hook"] for r in last["jobs"][0]["ranks"] if r["hook"] is not None]
    assert len(hooks) == 1 and hooks[0][0] > 0  # rank 0 calls step(); rank 1 does not
    # Its monotonic clock beside the wall clock: the watch's steady time for this host.
    assert all(isinstance(x["m"], float) for x in lines)
    assert [x["m"] for x in lines] == sorted(x["m"] for x in lines)
    assert abs((last["m"] - first["m"]) - (last["t"] - first["t"])) < 0.5


def test_a_launcher_that_a_running_process_execs_into_is_found(tmp_path: Path):
    # An entry script that execs the launcher once its setup is done, or a process caught
    # between its fork and its exec: first seen as something else, under the same pid.
    env = stand_in(tmp_path)
    cmd = sampler_text.command(sys.executable, sampler_text.SamplerOptions(
        0.3, 6.0, "tok-watch"))
    sampler = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, text=True)
    entry = None
    try:
        first = json.loads(sampler.stdout.readline())  # type: ignore[union-attr]
        assert first["jobs"] == []
        entry = subprocess.Popen(
            ["sh", "-c", 'sleep 1.5; exec "$@"', "sh", sys.executable, "-m",
             "paddle.distributed.launch", "--log_dir", str(tmp_path / "log"),
             str(tmp_path / "rank.py")], env=env, cwd=tmp_path, start_new_session=True)
        out, _ = sampler.communicate(timeout=30)
    finally:
        sampler.kill()
        if entry is not None:
            os.killpg(entry.pid, signal.SIGKILL)
            entry.wait(10)
    lines = [json.loads(ln) for ln in out.splitlines()]
    seen = [ln["jobs"][0]["pid"] for ln in lines if ln["jobs"]]
    assert seen and set(seen) == {entry.pid}, lines[-1]  # the shell's pid, now the launcher's
    assert len(lines[-1]["jobs"][0]["ranks"]) == 2, lines[-1]


def test_the_sampler_follows_only_the_marked_job_when_given_a_marker(job):
    assert sample("another-job", seconds=0.2)[0]["jobs"] == []


def test_the_sampler_sees_a_stopped_rank_and_a_rank_that_is_gone(job):
    _, ranks, _ = job
    os.kill(ranks[1], signal.SIGSTOP)
    try:
        states = {r["pid"]: r["state"] for r in sample("tok-watch", 0.2)[-1]["jobs"][0]["ranks"]}
        assert states[ranks[1]] == "T" and states[ranks[0]] in "RS"
    finally:
        os.kill(ranks[1], signal.SIGCONT)
    cmd = sampler_text.command(sys.executable, sampler_text.SamplerOptions(0.3, 3.0,
                                                                           "tok-watch"))
    p = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        first = json.loads(p.stdout.readline())
        assert len(first["jobs"][0]["ranks"]) == 2
        os.kill(ranks[1], signal.SIGKILL)
        gone = []
        for _ in range(10):
            gone = json.loads(p.stdout.readline())["gone"]
            if gone:
                break
        assert [g["pid"] for g in gone] == [ranks[1]]
        assert gone[0]["who"]["PADDLE_TRAINER_ID"] == "1"
    finally:
        p.kill()
        p.wait(10)


def watch(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONSAFEPATH="1")
    return subprocess.run([sys.executable, "-m", "preflight", "watch", "--marker",
                           "tok-watch", "--interval", "0.5", "--persist", "2", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_watch_once_on_this_machine_passes_a_running_job_and_names_a_stopped_rank(
        job, tmp_path):
    _, ranks, _ = job
    log = tmp_path / "watch.jsonl"
    prom = tmp_path / "watch.prom"
    ok = watch("--once", "--log", str(log), "--metrics-textfile", str(prom))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert 'preflight_watch_rank_stopped{host="' in prom.read_text()
    assert "pass     progress" in ok.stdout and "2 ranks of " in ok.stdout
    records = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert records[0]["type"] == "start" and records[-1] == {**records[-1], "type": "end",
                                                             "code": 0}
    assert sum(r["type"] == "sample" for r in records) >= 4  # every sample, as it came
    os.kill(ranks[1], signal.SIGSTOP)
    try:
        stopped = watch("--once", "--log", str(tmp_path / "stopped.jsonl"))
    finally:
        os.kill(ranks[1], signal.SIGCONT)
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    lines = [ln for ln in stopped.stdout.splitlines() if " fail " in f" {ln} "]
    assert len(lines) == 1 and "stopped" in lines[0] and "rank 1 (worker) is stopped" in lines[0]
    # The time it says it was stopped since is a time of day on this machine's wall clock
    # (not its monotonic clock's seconds since boot), a few seconds before the watch said it.
    since = re.search(r"since (\d\d):(\d\d):(\d\d)", lines[0])
    assert since, lines[0]
    said = time.localtime()
    ago = ((said.tm_hour - int(since[1])) * 3600 + (said.tm_min - int(since[2])) * 60
           + said.tm_sec - int(since[3])) % 86400
    assert ago < 120, (lines[0], time.strftime("%H:%M:%S", said))


def test_watch_says_in_one_line_what_it_cannot_open(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = watch("--once", "--log", str(tmp_path / "w.jsonl"), "--metrics-port",
                      str(port))
    assert taken.returncode == 2
    assert taken.stderr.strip().splitlines()[-1].startswith(
        f"preflight: error: watch: --metrics-port: cannot listen on 127.0.0.1:{port}: ")
    bad_log = watch("--once", "--log", "/proc/nope/w.jsonl")
    assert bad_log.returncode == 2
    assert bad_log.stderr.strip() == ("preflight: error: watch: --log /proc/nope/w.jsonl: "
                                      "No such file or directory")
    bad_pattern = watch("--once", "--step-pattern", "step (")
    assert bad_pattern.returncode == 2
    assert bad_pattern.stderr.strip().splitlines()[-1].startswith(
        "preflight watch: error: argument --step-pattern: not a regular expression: ")


# The GPU part, through the stand-ins of NVML and nvidia-smi (tests/fixtures).
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAKE_NVML = FIXTURES / "fake_pynvml"
FAKE_SMI = FIXTURES / "fake_nvidia_smi"




def test_without_a_driver_the_sampler_reads_no_gpu(job):
    if G.has_driver():
        pytest.skip("this machine has an NVIDIA driver")
    lines = sample("tok-watch", 0.2)
    assert all("gpu" not in ln for ln in lines)


def test_the_sampler_reads_gpus_through_nvml_and_gives_each_rank_its_gpu(job):
    _, ranks, _ = job
    env = dict(os.environ, PYTHONPATH=str(FAKE_NVML), FAKE_NVML="h100",
               FAKE_NVML_PIDS=f"0:{ranks[1]}")
    last = sample("tok-watch", 0.6, 0.3, gpu="always", env=env)[-1]
    assert last["gpu"]["source"] == "nvml"
    assert [g["sm"] for g in last["gpu"]["gpus"]] == [1980, 1215]
    on = {r["pid"]: r.get("gpus") for r in last["jobs"][0]["ranks"]}
    # rank 1 on GPU 0 as NVML lists it; rank 0 on the GPU its launcher selected (0)
    assert on == {ranks[0]: [0], ranks[1]: [0]}


def test_the_sampler_reads_gpus_through_nvidia_smi_where_nvml_is_missing(job):
    _, ranks, _ = job
    tag = f"sampler-{os.getpid()}"  # its nvidia-smi, not one of a test beside it
    env = dict(os.environ, PATH=f"{FAKE_SMI}{os.pathsep}{os.environ['PATH']}", FAKE_NVML="h100",
               SMI_TAG=tag)
    env.pop("PYTHONPATH", None)
    lines = sample("tok-watch", 1.5, 0.3, gpu="always", env=env)
    last = lines[-1]
    assert last["gpu"]["source"] == "nvidia-smi"
    assert [(g["i"], g["sm"], g["reasons"]) for g in last["gpu"]["gpus"]] == \
        [(0, 1980, 0x1), (1, 1215, 0x41)]
    on = {r["pid"]: r.get("gpus") for r in last["jobs"][0]["ranks"]}
    assert on == {ranks[0]: [0], ranks[1]: [1]}  # FLAGS_selected_gpus, nvidia-smi has no pids
    end = time.monotonic() + 10
    while procs_with_env("SMI_TAG", tag) and time.monotonic() < end:
        time.sleep(0.05)
    assert procs_with_env("SMI_TAG", tag) == [], "nvidia-smi outlived the sampler"


def test_a_host_whose_gpus_cannot_be_read_says_why_in_every_sample(job):
    env = dict(os.environ, PATH="/usr/bin:/bin")
    env.pop("PYTHONPATH", None)
    lines = sample("tok-watch", 0.2, gpu="always", env=env)
    why = lines[0]["gpu"]["error"]
    assert why.startswith("NVML: ") and why.endswith("no nvidia-smi on the PATH")
    assert all(ln["gpu"] == {"error": why} for ln in lines)


# Rank 1 sleeps while a worker of its own (a DataLoader's) computes for a while, then exits.
BUSY_WORKER = """\
import subprocess, sys, time
rank = int(sys.argv[1])
if rank == 1:
    subprocess.Popen([sys.executable, "-c",
                      "import time\\nend = time.time() + 1.5\\nwhile time.time() < end: pass"])
for n in range(100000):
    time.sleep(0.05)
    print("step %d loss 0.1" % n, flush=True)
"""


@pytest.mark.parametrize("job", [BUSY_WORKER], indirect=True, ids=["busy-worker"])
def test_a_ranks_workers_cpu_counts_to_it_and_stays_counted_once_they_exit(job):
    _, ranks, _ = job
    lines = sample("tok-watch", seconds=3.5, interval=0.5)
    runs: dict[int, list[float]] = {r: [] for r in ranks}
    for ln in lines:
        for r in ln["jobs"][0]["ranks"] if ln["jobs"] else ():
            if "run_s" in r:
                runs[r["pid"]].append(r["run_s"])
    quiet, busy = (runs[ranks[0]], runs[ranks[1]])
    assert len(busy) >= 4 and len(quiet) >= 4
    # The worker's CPU is the rank's; when it exits, the rank's total does not fall back.
    assert all(b >= a for a, b in zip(busy, busy[1:])), busy
    assert busy[-1] - busy[0] > 3 * (quiet[-1] - quiet[0]) + 0.1, (busy, quiet)


def test_a_kernel_without_schedstat_is_said_and_its_zeros_never_taken_for_idle(monkeypatch):
    """This kernel keeps schedstat; one built without CONFIG_SCHED_INFO has no such file:
    its reads fail as they would there."""
    from preflight.hostside import procfs
    from preflight.hostside import sampler_rank as S

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        rank = S.Rank(busy.pid, {"PADDLE_TRAINER_ID": "0"}, os.getpid())
        run_s, _, _, _, timed = S.ThreadTimes().read(busy.pid)
        assert timed and run_s > 0
        assert "sched" not in rank.sample(re.compile("step"), {})
        real = procfs.read

        def no_schedstat(path, *a):
            if path.endswith("/schedstat"):
                raise FileNotFoundError(2, "No such file or directory", path)
            return real(path, *a)

        monkeypatch.setattr(procfs, "read", no_schedstat)
        assert S.ThreadTimes().read(busy.pid)[4] is False
        rank = S.Rank(busy.pid, {"PADDLE_TRAINER_ID": "0"}, os.getpid())  # read there first
        part = rank.sample(re.compile("step"), {})
        assert part["sched"] is False and part["run_s"] == 0
        assert part["cpu_s"] > 0  # its CPU time is still read, from its stat
    finally:
        busy.kill()
        busy.wait(10)
    # A process gone between the listing and the read says nothing of the kernel.
    assert S.has_schedstat(busy.pid) is True


def test_a_ranks_cpu_time_stays_counted_once_a_thread_of_it_ends():
    """A thread's scheduler times leave /proc with it: summed over the threads left, a rank's
    total would fall (read as negative busy time beside its peers). Its total never falls."""
    from preflight.hostside import sampler_rank as S

    times = S.ThreadTimes()
    pid = os.getpid()
    ran, stop = threading.Event(), threading.Event()
    deadline = time.monotonic() + 10
    tid: list[int] = []

    def busy() -> None:  # 0.2 s on a CPU (however long that takes here), then it waits
        tid.append(threading.get_native_id())
        while time.thread_time() < 0.2 and time.monotonic() < deadline:
            pass
        ran.set()
        stop.wait(10)

    def run_s(*tids: object) -> float:
        return sum(int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
                   for t in tids) / 1e9

    spin = threading.Thread(target=busy)
    spin.start()
    assert ran.wait(10)
    during, its_run = times.read(pid)[0], run_s(tid[0])
    stop.set()
    spin.join(10)
    while str(tid[0]) in os.listdir(f"/proc/{pid}/task") and time.monotonic() < deadline:
        time.sleep(0.01)  # join returns a moment before the kernel lets the thread go
    after = times.read(pid)[0]
    threads_left = run_s(*os.listdir(f"/proc/{pid}/task"))
    assert str(tid[0]) not in os.listdir(f"/proc/{pid}/task") and its_run >= 0.2
    # Its time left /proc with it; what was read of it is counted still (what it ran after
    # the last read is not known: no more than an interval's), and the total never falls.
    assert after >= during, (during, after)
    assert after - threads_left >= its_run - 0.05, (after, threads_left, its_run)


def test_the_sampler_reads_each_ranks_storage_bytes_and_a_frozen_cgroup(job):
    if os.geteuid() != 0:
        pytest.skip("needs root: a freezer cgroup of its own")
    _, ranks, _ = job
    with frozen(ranks[1]):
        time.sleep(0.3)
        by_pid = {r["pid"]: r for r in sample("tok-watch", 0.2)[-1]["jobs"][0]["ranks"]}
    for pid in ranks:
        io = by_pid[pid]["io"]
        assert isinstance(io, list) and len(io) == 2 and all(x >= 0 for x in io), io
    assert by_pid[ranks[1]].get("frozen") is True
    assert "frozen" not in by_pid[ranks[0]]  # said only of a frozen one
    after = {r["pid"]: r for r in sample("tok-watch", 0.2)[-1]["jobs"][0]["ranks"]}
    assert "frozen" not in after[ranks[1]]  # thawed: said no more
