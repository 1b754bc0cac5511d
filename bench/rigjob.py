"""What the rig's benchmarks and captures share: preflight run from the simulated cluster's
client namespace in a session of its own, and its processes interrupted at the end as a
terminal's Ctrl-C would (then killed where they linger)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from preflight.testing import testbed


def cli(tb: testbed.Testbed, *args: str, quiet: bool = False) -> subprocess.Popen[str]:
    """preflight ARGS from the client namespace; quiet: its standard output thrown away."""
    return subprocess.Popen(tb.client_cmd([sys.executable, "-m", "preflight", *args]),
                            stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tb.base,
                            env=dict(os.environ, PYTHONSAFEPATH="1"),
                            preexec_fn=os.setsid)


def interrupt(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGINT to each process group still running, then SIGKILL to any left after 90 s."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
    for p in procs:
        try:
            p.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
