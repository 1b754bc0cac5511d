"""A rank the kernel's OOM killer takes is named so, on the evidence of its memory cgroup's
oom_kill count, not guessed from a silent log: a real OOM kill on this machine (a stand-in
launcher and its rank in a memory cgroup of 64 MiB, the rank asking for 512 MiB), read by the
real sampler and judged by the watch."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from preflight.hostside import sampler_rank
from preflight.model.watch import WatchPolicy
from preflight.testing import standin
from preflight.watch import sampler_text
from preflight.watch.judge import judge
from preflight.watch.samples import HostStream
from preflight.watch.series import WatchState

LIMIT = 64 << 20

LAUNCHER = '''\
import os, subprocess, sys
log = sys.argv[sys.argv.index("--log_dir") + 1]
os.makedirs(log, exist_ok=True)
env = dict(os.environ, PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="1")
with open(os.path.join(log, "workerlog.0"), "w") as out:
    subprocess.call([sys.executable, sys.argv[-1]], env=env, stdout=out,
                    stderr=subprocess.STDOUT)
'''

RANK = '''\
import time
for n in range(15):
    print("step %d loss 0.1" % n, flush=True)
    time.sleep(0.1)
data = bytearray(512 << 20)  # zero-filled: every page touched, past the cgroup's limit
print("step 15 loss 0.1", flush=True)
'''


def memory_cgroup() -> tuple[Path, str, str]:
    """(a new memory cgroup's directory, its limit file, its OOM count file), on this
    machine's memory controller: cgroup v1's hierarchy, else cgroup2 with memory."""
    name = f"preflight-oom-{secrets.token_hex(4)}"
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists():
        return v1 / name, "memory.limit_in_bytes", "memory.oom_control"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup2"]:
            root = Path(left.split()[4])
            if "memory" in (root / "cgroup.subtree_control").read_text().split():
                return root / name, "memory.max", "memory.events"
    raise AssertionError("no memory cgroup controller on this machine")


@pytest.fixture
def limited(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root: a memory cgroup of its own")
    cg, limit, _ = memory_cgroup()
    cg.mkdir()
    try:
        (cg / limit).write_text(str(LIMIT))
        if (cg / "memory.swap.max").exists():
            (cg / "memory.swap.max").write_text("0")
        yield cg
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_the_oom_killers_kill_is_read_from_the_cgroup_and_named_as_the_cause(
        limited: Path, tmp_path: Path):
    (tmp_path / "rank.py").write_text(RANK)
    fake = standin.paddle_launcher(tmp_path / "fake", LAUNCHER)
    env = dict(os.environ, PYTHONPATH=str(fake), PREFLIGHT_LAUNCH="tok-oom")
    env.pop("PYTHONSAFEPATH", None)
    watcher = subprocess.Popen(sampler_text.command(sys.executable, sampler_text.SamplerOptions(
        0.3, 8.0, "tok-oom")), shell=True, stdout=subprocess.PIPE, text=True)
    launcher = subprocess.Popen(
        ["sh", "-c", f'echo $$ > {limited}/cgroup.procs && exec "$@"', "sh", sys.executable,
         "-m", "paddle.distributed.launch", "--log_dir", str(tmp_path / "log"),
         str(tmp_path / "rank.py")], env=env, cwd=tmp_path, start_new_session=True)
    lines: list[str] = []
    try:
        assert watcher.stdout is not None
        for _ in range(30):  # a line each 0.3 s: 9 s at most
            line = watcher.stdout.readline()
            if not line:
                break
            lines.append(line)
            if json.loads(line)["gone"]:
                break
    finally:
        watcher.kill()
        watcher.wait(10)
        try:
            os.killpg(launcher.pid, signal.SIGKILL)
        except OSError:
            pass
        launcher.wait(10)
    docs = [json.loads(ln) for ln in lines]
    ranks = [r for d in docs for j in d["jobs"] for r in j["ranks"]]
    assert ranks and {r["oom_kills"] for r in ranks if r["state"] != "Z"} == {0}, ranks[-1:]
    [gone] = docs[-1]["gone"]
    assert gone["oom_kills"] == [0, 1], gone
    stream, state = HostStream("node01"), WatchState(keep=40)
    for i, ln in enumerate(lines):
        state.add(stream.feed(ln), received=0.3 * i)
    policy = WatchPolicy(interval_s=0.3, margin=0.25, persist_s=0.9, hang_s=60.0)
    [dead] = [f for f in judge(state, policy, docs[-1]["t"], {}) if f.check == "dead"]
    assert dead.hosts == ("node01",)
    assert ("the kernel's OOM killer killed it: its memory cgroup's oom_kill count went from "
            "0 to 1") in dead.message, dead.message


def test_the_count_is_read_from_either_file_as_the_kernel_writes_it(tmp_path: Path):
    # cgroup v2's memory.events as the GPU machine's kernel wrote it after a kill (the
    # capture), and v1's memory.oom_control as this machine's kernel writes it.
    capture = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "cgroup2"
                          / "h200-quota-half-core.json").read_text())
    (tmp_path / "memory.events").write_text(
        capture["cgroups"]["preflight-capture/oom"]["memory.events"])
    (tmp_path / "memory.oom_control").write_text(
        Path("/sys/fs/cgroup/memory/memory.oom_control").read_text()
        if Path("/sys/fs/cgroup/memory/memory.oom_control").exists()
        else "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert sampler_rank.oom_kills(str(tmp_path / "memory.events")) == 1
    assert isinstance(sampler_rank.oom_kills(str(tmp_path / "memory.oom_control")), int)
    (tmp_path / "empty").write_text("low 0\nhigh 0\n")
    assert sampler_rank.oom_kills(str(tmp_path / "empty")) is None
