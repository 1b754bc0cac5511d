"""Files preflight writes as root, into directories other users share: never through a link
another user planted in a sticky or world-writable directory, never into a device or a pipe,
never at a fixed temp name; and the step hook's file in /dev/shm neither written through
another user's link nor read by the sampler when another user left it. Real files, a real
other user (nobody, by chown), real links and pipes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from preflight.common import safewrite
from preflight.hostside.sampler_rank import hook_steps
from preflight.hostside.stephook import HOOK_DIR_VAR, HOOK_NAME
from preflight.model.plan import Plan
from preflight.model.policy import JobShape
from preflight.placement import launcher
from preflight.report import jsonreport

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown to another user")


def _shared(tmp_path: Path) -> Path:
    """A directory every user can write into, sticky, as /tmp and /dev/shm are."""
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


def _secret(tmp_path: Path) -> Path:
    """Root's file, 0600: what a planted link points a root write at."""
    f = tmp_path / "root-only"
    f.write_text("root's own\n")
    f.chmod(0o600)
    return f


def _plant(link: Path, target: Path, uid: int = NOBODY) -> None:
    link.symlink_to(target)
    os.lchown(link, uid, uid)


def test_a_report_is_not_written_through_another_users_link_in_a_shared_directory(tmp_path):
    shared, secret = _shared(tmp_path), _secret(tmp_path)
    _plant(shared / "report.json", secret)
    with pytest.raises(safewrite.UnsafeWrite, match="a link owned by uid 65534"):
        jsonreport.write_text_atomic(str(shared / "report.json"), "{}\n")
    assert secret.read_text() == "root's own\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert (shared / "report.json").is_symlink()
    assert os.listdir(shared) == ["report.json"]  # no temp file left behind


def test_a_users_own_link_is_written_through_and_stays_a_link(tmp_path):
    shared, secret = _shared(tmp_path), _secret(tmp_path)
    _plant(shared / "report.json", secret, uid=os.geteuid())
    jsonreport.write_text_atomic(str(shared / "report.json"), "new\n")
    assert (shared / "report.json").is_symlink() and secret.read_text() == "new\n"
    # ... and so is one in a directory no other user can write into, whoever made it.
    private = tmp_path / "private"
    private.mkdir(mode=0o755)
    _plant(private / "r.json", secret)
    jsonreport.write_text_atomic(str(private / "r.json"), "newer\n")
    assert secret.read_text() == "newer\n"


def test_a_pipe_or_a_device_is_refused_and_nothing_is_written_into_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer would not block
    try:
        with pytest.raises(safewrite.UnsafeWrite, match="not a regular file"):
            jsonreport.write_text_atomic(str(fifo), "{}\n")
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)
    with pytest.raises(safewrite.UnsafeWrite, match="not a regular file"):
        safewrite.write_text("/dev/null", "x")
    with pytest.raises(safewrite.UnsafeWrite, match="not a regular file"):
        safewrite.open_append(str(fifo))


def test_launch_scripts_are_written_at_no_name_a_link_can_wait_at(tmp_path):
    shared, secret = _shared(tmp_path), _secret(tmp_path)
    node = launcher.collective_node("n1", "10.0.0.1", "/opt/paddle/bin/python", 1, 2, 1,
                                    "10.0.0.2:6767", [6070, 6071], (6070, 6071), None)
    plan = Plan("collective", JobShape(), (node,), master="10.0.0.2:6767", nproc_per_node=1)
    # The fixed temp names an earlier version wrote through, planted by another user.
    for name in ("n1.sh.tmp", "n1.env.tmp"):
        _plant(shared / name, secret)
    written = launcher.emit(plan, str(shared))
    assert secret.read_text() == "root's own\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    script = shared / "n1.sh"
    assert str(script) in written and not script.is_symlink()
    assert stat.S_IMODE(script.stat().st_mode) == 0o755 and script.stat().st_uid == os.geteuid()
    # The script itself a link of another user's: refused, not replaced by what it names.
    script.unlink()
    _plant(script, secret)
    with pytest.raises(safewrite.UnsafeWrite):
        launcher.emit(plan, str(shared))
    assert secret.read_text() == "root's own\n"


def test_a_log_is_appended_to_only_through_a_link_of_its_own(tmp_path):
    shared, secret = _shared(tmp_path), _secret(tmp_path)
    _plant(shared / "watch.jsonl", secret)
    with pytest.raises(safewrite.UnsafeWrite):
        safewrite.open_append(str(shared / "watch.jsonl"))
    with safewrite.open_append(str(shared / "own.jsonl")) as fh:
        fh.write("one\n")
    with safewrite.open_append(str(shared / "own.jsonl")) as fh:
        fh.write("two\n")
    assert (shared / "own.jsonl").read_text() == "one\ntwo\n"
    assert secret.read_text() == "root's own\n"


STEP_CHILD = """
import os, sys
sys.stdin.readline()  # the test has planted what it plants at this process's name
import preflight.watch
preflight.watch.step(5)
path = os.path.join(os.environ["PREFLIGHT_WATCH_DIR"], "preflight-watch.%d" % os.getpid())
print(open(path).read().split()[0] if os.path.isfile(path) else "none", flush=True)
"""


def _step_child(directory: Path, plant) -> str:
    """Runs preflight.watch.step() in a child whose hook file is at directory, after
    plant(path of its file) ran; returns the steps its file then held ("none": no file)."""
    env = dict(os.environ, **{HOOK_DIR_VAR: str(directory)}, PYTHONSAFEPATH="1")
    p = subprocess.Popen([sys.executable, "-c", STEP_CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        plant(directory / (HOOK_NAME % p.pid))
        out, _ = p.communicate("go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    assert p.returncode == 0
    return out.strip()


def test_the_step_hook_never_writes_through_another_users_link(tmp_path):
    shared, secret = _shared(tmp_path), _secret(tmp_path)
    _step_child(shared, lambda path: _plant(path, secret))
    assert secret.read_text() == "root's own\n"  # the hook stays silent instead


def test_the_step_hook_replaces_its_own_users_stale_file(tmp_path):
    shared = _shared(tmp_path)
    seen: dict[str, Path] = {}

    def plant(path: Path) -> None:
        path.write_text("999 1.0\n")  # an earlier process's of the same pid, ours
        seen["path"] = path

    # The child counted its 5 steps where the stale count was (and removed its file at its
    # exit): a stale file of its own user's is replaced, the hook not silenced by it.
    assert _step_child(shared, plant) == "5"
    assert not seen["path"].exists()


def test_the_sampler_reads_a_hook_file_only_of_the_ranks_own_user(tmp_path):
    shared = _shared(tmp_path)
    pid = os.getpid()  # this process, root's: a rank whose file is looked for
    path = shared / (HOOK_NAME % pid)
    path.write_text("42 1700000000.0\n")
    assert hook_steps(pid, pid, (str(shared),)) == (42, 1700000000.0)
    os.chown(path, NOBODY, NOBODY)  # another user's file under its name: made-up counts
    assert hook_steps(pid, pid, (str(shared),)) is None
    path.unlink()
    os.mkfifo(path)  # a pipe there would hold the sampler: not opened for reading
    os.chown(path, os.geteuid(), os.geteuid())
    assert hook_steps(pid, pid, (str(shared),)) is None
