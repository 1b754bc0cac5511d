"""`preflight demo`: check a simulated cluster built on this machine, then remove it (root)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Optional

from preflight.testing import testbed

DEMO_LINK = "1gbit"


def _check(tb: testbed.Testbed, title: str, inventory: str, reports: Optional[str],
           name: str, *extra: str) -> int:
    shown = " ".join(("preflight check -i", os.path.basename(inventory), *extra))
    print(f"\n=== {title}\n$ {shown}", flush=True)
    env = dict(os.environ, PYTHONSAFEPATH="1")
    out: list[str] = []
    if reports:
        base = os.path.join(reports, name)
        out = ["--json", base + ".json", "--html", base + ".html", "--junit", base + ".xml",
               "--markdown", base + ".md", "--no-step-summary"]
    return subprocess.run(tb.client_cmd([sys.executable, "-m", "preflight", "check", "-i",
                                         inventory, "--no-progress", "--iperf-seconds", "2",
                                         "--allreduce-sizes", "1,8", *extra, *out]),
                          cwd=tb.base, env=env, timeout=300).returncode


def run_demo(n_hosts: int, reports: Optional[str] = None) -> int:
    """Builds n simulated hosts, checks the healthy ones (GO), then all with real faults
    (NO-GO), then a job sized to what is left (GO, with a plan that leaves the faulty hosts
    out); returns 0 when the verdicts came out as they should. With reports, each check's
    JSON, HTML, JUnit and Markdown reports go there."""
    why = testbed.can_run()
    if why:
        print(f"preflight demo: cannot build the simulated cluster: {why}", file=sys.stderr)
        return 2
    python = testbed.paddle_python("3.3.1")
    other = testbed.paddle_python("2.6.2")
    if not os.access(python, os.X_OK):
        print(f"preflight demo: {python} missing; run scripts/setup.sh first", file=sys.stderr)
        return 2
    if reports:
        reports = os.path.abspath(reports)  # the checks run from the testbed's directory
        os.makedirs(reports, exist_ok=True)
    names = [f"node{i:02d}" for i in range(1, max(4, n_hosts) + 1)]
    print(f"building {len(names)} simulated hosts (network namespaces, one sshd each) ...")
    with testbed.Testbed(len(names), names=names) as tb:
        for name in names:
            tb.throttle(name, DEMO_LINK)  # NIC-like links: steady figures to compare
        healthy = names[:-1]
        rc_go = _check(tb, f"{len(healthy)} healthy hosts", tb.inventory(
            os.path.join(tb.base, "healthy.yaml"), healthy, python=python), reports, "healthy")
        starved, odd, slow = names[-1], names[-2], names[-3]
        tb.limit_cpu(starved, 0.25)
        tb.unthrottle(slow)
        tb.throttle(slow, "100mbit")
        overrides: dict[str, dict[str, object]] = (
            {odd: {"python": other}} if os.access(other, os.X_OK) else {})
        print(f"\ninjecting faults: {starved} gets a cgroup CPU quota of 0.25 cores; "
              f"{slow}'s link is limited to 100 Mbit/s (tc tbf)"
              + (f"; {odd} uses Paddle 2.6.2" if overrides else ""))
        faulty = tb.inventory(os.path.join(tb.base, "faulty.yaml"), names, python=python,
                              overrides=overrides)
        rc_nogo = _check(tb, f"all {len(names)} hosts, with faults", faulty, reports, "faulty")
        fine = len(names) - 2 - bool(overrides)
        rc_sized = _check(tb, f"a job sized to the {fine} hosts that pass", faulty, reports,
                          "sized", "--nnodes", str(fine))
    print(f"\nsimulated cluster removed. exit codes: healthy {rc_go} (GO=0), "
          f"faulty {rc_nogo} (NO-GO=1), sized {rc_sized} (GO=0)"
          + (f"\nreports (JSON, HTML, JUnit, Markdown) in {reports}: open faulty.html"
             if reports else ""))
    return 0 if (rc_go, rc_nogo, rc_sized) == (0, 1, 0) else 1
