"""64 simulated hosts sharing one fault: the terminal view stays readable."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Iterator

import pytest
from conftest import require_testbed

from preflight.testing import testbed

pytestmark = pytest.mark.cluster

N_HOSTS = 64
COLUMNS = 80
NAMES = [f"gpu{i:02d}" for i in range(1, N_HOSTS + 1)]


@pytest.fixture(scope="module")
def wide() -> Iterator[testbed.Testbed]:
    require_testbed()
    tb = testbed.Testbed(N_HOSTS, names=NAMES)
    try:
        yield tb
    finally:
        tb.close()


def on_terminal(argv: list[str], cwd: str, columns: int, timeout: float,
                ) -> tuple[int, str, str]:
    """Runs argv with its standard output on a pseudo-terminal of columns columns; returns
    its exit code, what it wrote there (newlines as written) and its standard error."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONSAFEPATH="1", TERM="xterm")
    # Standard error to a file: a pipe nobody reads until the end could fill and block it.
    with tempfile.TemporaryFile("w+") as errors, \
            subprocess.Popen(argv, stdout=slave, stderr=errors, cwd=cwd, env=env) as p:
        os.close(slave)
        chunks, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        try:
            code = p.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            raise
        errors.seek(0)
        err = errors.read()
    return code, b"".join(chunks).decode().replace("\r\n", "\n"), err


def test_a_64_host_no_go_with_one_shared_fault_fits_in_40_lines(wide):
    # Every host's training interpreter is missing: one fault, 64 times.
    inv = wide.inventory(os.path.join(wide.base, "wide.yaml"), NAMES,
                         python="/nonexistent/bin/python")
    # On a terminal of 80 columns (a pipe gets whole lines).
    code, out, err = on_terminal(wide.client_cmd([
        sys.executable, "-m", "preflight", "check", "-i", inv, "--no-network-tests",
        "--cpu-sample", "0.1", "--no-log", "--no-progress", "--color", "never"]),
        wide.base, COLUMNS, 300)
    assert code == 1, out + err
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert max(len(ln) for ln in lines) <= COLUMNS, out
    # The fault is one line naming every host as a hostlist, not 64 lines.
    fault = [ln for ln in lines if ln.startswith("fail ")]
    # (The hosts column is as wide as the widest hosts of any line: the pass lines' vary.)
    assert len(fault) == 1 and re.search(r"paddle-stack +gpu\[01-64\] +Paddle not importable",
                                         fault[0]), fault
    assert lines[-1].startswith("NO-GO: 1 failed on 64 hosts: "), lines[-1]
    assert "left out gpu[01-64]: " in out  # the plan's left-out hosts, grouped too
