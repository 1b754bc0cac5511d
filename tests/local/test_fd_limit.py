"""A large fan-out raises the open-files limit it needs, in a process of its own."""

from __future__ import annotations

import subprocess
import sys

from preflight.common.hostjob import CollectOptions, fds_needed


def test_fd_limit_is_raised_for_large_fan_outs():
    # A child process, so that this test's own limit is left alone.
    code = ("import resource; from preflight.common.hostjob import raise_fd_limit;"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096));"
            "print(raise_fd_limit(100), raise_fd_limit(3000), raise_fd_limit(9000),"
            "resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=30).stdout.split(maxsplit=3)
    assert out[:3] == ["256", "3000", "4096"]  # untouched; raised; capped at the hard limit
    assert out[3].strip() == "(4096, 4096)"
    opts = CollectOptions(forks=32, keep_connections=True)
    assert fds_needed(5000, opts) > 5000 > fds_needed(5000, CollectOptions(forks=32))
