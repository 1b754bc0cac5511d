"""The step hook a training script calls: what it writes, how often, where."""

from __future__ import annotations

import os
import subprocess
import sys


def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30, env={**os.environ, **env, "PYTHONSAFEPATH": "1"})


def test_step_counts_into_a_file_named_for_the_pid_and_removes_it_at_exit(tmp_path):
    code = ("import os, time\nfrom preflight.watch import step\n"
            "for _ in range(7):\n    step()\ntime.sleep(0.25)\nstep(3)\n"
            "p = os.path.join(os.environ['PREFLIGHT_WATCH_DIR'], 'preflight-watch.%d' % "
            "os.getpid())\nprint(open(p).read().split()[0])\n")
    p = run(code, {"PREFLIGHT_WATCH_DIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "10"  # the first call wrote 1; 0.25 s later, all 10
    assert os.listdir(tmp_path) == []


def test_step_loads_nothing_else_of_preflight():
    p = run("import sys\nfrom preflight.watch import step\nstep()\n"
            "print(sorted(m for m in sys.modules if m.startswith('preflight')))", {})
    assert p.returncode == 0, p.stderr
    # and the hook file's contract (stephook: the standard library only), which the sampler
    # that reads the file shares
    assert p.stdout.strip() == ("['preflight', 'preflight.hostside', "
                                "'preflight.hostside.stephook', 'preflight.watch']")


def test_a_disk_that_refuses_the_file_does_not_stop_the_training(tmp_path):
    p = run("from preflight.watch import step\nfor _ in range(3):\n    step()\nprint('ok')",
            {"PREFLIGHT_WATCH_DIR": str(tmp_path / "missing")})
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_the_hooks_file_is_where_the_sampler_looks_and_reads_as_it_was_written(tmp_path):
    # Both ends of the contract, from the one module that writes it down: the hook's path
    # is among the sampler's places for the same environment, and its text parses back.
    from preflight.hostside import stephook
    for env, writable, where in (
            ({"PREFLIGHT_WATCH_DIR": str(tmp_path)}, True, str(tmp_path)),
            ({}, True, "/dev/shm"),
            ({"TMPDIR": "/scratch/job"}, False, "/scratch/job"),  # no writable /dev/shm
            ({}, False, "/tmp")):
        def can_write(path: str, mode: int, w: bool = writable) -> bool:
            return w
        path = stephook.hook_path(env, 4242, can_write)
        assert os.path.dirname(path) == where, (env, path)
        assert where in stephook.hook_dirs(env)
        assert os.path.basename(path) == stephook.HOOK_NAME % 4242
    line = stephook.hook_line(12345, 1795000000.25)
    assert len(line) == 42  # fixed width: rewritten in place, never shorter
    assert stephook.hook_parse(line.decode()) == (12345, 1795000000.25)
    assert stephook.hook_parse("") is None and stephook.hook_parse("12 x") is None
