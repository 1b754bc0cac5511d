"""Shared fixtures: the simulated cluster (built once per session) and a preflight runner."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import lanes
import pytest
import timeledger
from hypothesis import settings

from preflight.testing import testbed

PADDLE_A = testbed.paddle_python("3.3.1")
PADDLE_B = testbed.paddle_python("2.6.2")

# One cluster for the whole session; each fault lives on its own host so tests do not
# depend on their order. Healthy: good1-4. Faults are injected once, at build time.
HOSTS = ("good1", "good2", "good3", "good4", "dead", "hung", "rekeyed", "starved", "stuck", "drift",
         "slow", "badrank", "tmpfull", "flaky")
DRIFT_CLOCK_S = 30
# How long the session's planted listeners (a hung sshd, a held port) live: longer than any
# run (CI stops one at 90 minutes; a lane may first use the cluster late in it). The
# testbed's close() ends them; the bound only keeps one from outliving a killed run.
FAULT_LIFETIME_S = 3 * 3600
TRAIN_PY = "/root/job/train.py"
STUCK_SHELL_S = 12  # stuck's login shell blocks this long before running any command
STARVED_CORES = 0.25
# Every link is shaped like a NIC: an unshaped veth runs as fast as the 2 CPUs let it, which
# varies by half from run to run. slow's link is a tenth of the others, both ways.
LINK_RATE = "1gbit"
SLOW_RATE = "100mbit"
BAD_IFNAME = "nope0"  # badrank's login shell points gloo at an interface it does not have
# The simulated hosts share this machine's 2 cores, its load average and /proc/stat: CPU
# headroom cannot differ between them here (the planner's use of it is unit-tested on facts),
# so PS-mode runs here turn the per-process needs off.
SHARED_CPU = "limits: {ps_server_cores: 0, ps_trainer_cores: 0, cpu_busy_ratio: 100}\n"


@pytest.fixture
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: the machine's ~/.ssh/config must not decide what a test of
    the OpenSSH config or an inventory sees (each writes the config it means)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


# `pytest -n 2` (pytest-xdist, as scripts/test.sh runs it) runs two lanes: each worker, and
# all it starts, on CPUs of its own (tests/lanes.py), so that one module's simulated hosts
# never see another module's load. A module is one unit of work (its clusters are built once,
# in one worker); units go longest first, by the durations a whole run measured
# (tests/durations.json, written by scripts/durations.py), so that neither lane waits long for
# the other at the end.
DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_S = 30.0  # a module not measured yet: placed among the middling ones
# The testbeds of 32 and 64 hosts raise the machine's one ARP table's limits and put them back
# when they close: never both at once (one would put back what the other still needs).
LARGE_TESTBEDS = ("tests/cluster/test_scale_go.py", "tests/cluster/test_scale_view.py")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the large testbeds' one unit."""
    module = nodeid.split("::", 1)[0]
    return LARGE_TESTBEDS[0] if module in LARGE_TESTBEDS else module


def measured_durations() -> dict[str, float]:
    """Each module's seconds, as the last whole run measured them (scripts/durations.py)."""
    try:
        with open(DURATIONS) as fh:
            return {str(k): float(v) for k, v in json.load(fh)["modules"].items()}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return {}


class _LongestModulesFirst:
    """xdist's scheduler of whole modules, handed out longest first, one at a time."""

    @staticmethod
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        from xdist.scheduler import LoadScopeScheduling

        known = measured_durations()

        class Scheduling(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return unit_of(nodeid)

            def _assign_work_unit(self, node: Any) -> None:
                longest = max(self.workqueue, key=lambda unit: known.get(unit, UNKNOWN_S))
                self.workqueue.move_to_end(longest, last=False)
                super()._assign_work_unit(node)

            def _reschedule(self, node: Any) -> None:
                # A worker runs a test once it knows the next (for the fixtures' teardown):
                # the next module is given when one test is left, not two, so that a lane
                # never holds a module queued behind a long one while the other lane idles.
                if self.workqueue and not node.shutting_down and \
                        self._pending_of(self.assigned_work[node]) > 1:
                    return
                super()._reschedule(node)

        return Scheduling(config, log)


_LANE = pytest.StashKey[Optional[str]]()
_LEDGER = pytest.StashKey[timeledger.Ledger]()


def pytest_configure(config: pytest.Config) -> None:
    # A stage scripts/test.sh runs in the background (the tests marked long) starts with
    # SIGINT ignored, as bash starts every asynchronous command without job control: it must
    # stop on SIGINT as a run from a terminal does, its clusters taken down.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_LongestModulesFirst(), "preflight-longest-first")
    worker = getattr(config, "workerinput", None)
    if worker is not None and os.geteuid() == 0:
        index = int(str(worker["workerid"]).lstrip("gw") or 0)
        config.stash[_LANE] = lanes.enter(index, int(worker["workercount"]))
    # Where each test's time goes (PREFLIGHT_TIMINGS): sampled in the process that runs the
    # tests, a worker or a run without workers, never in the one that hands them out.
    if worker is not None or not config.getoption("numprocesses", None):
        ledger = timeledger.install(config.stash.get(_LANE, None))
        if ledger is not None:
            config.stash[_LEDGER] = ledger
    # Hypothesis's examples in CI are the same run after run, and a failing one is printed
    # in a form that replays it (@reproduce_failure).
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")
    # A run ended from outside (a CI job's timeout, a closed terminal, a background run,
    # whose SIGINT is ignored, stopped with kill) would die before any fixture's teardown
    # and leave its simulated hosts behind: their namespaces, sshd, slurmd, cgroups. As a
    # Ctrl-C, pytest tears every fixture down first.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


def pytest_unconfigure(config: pytest.Config) -> None:
    ledger = config.stash.get(_LEDGER, None)
    if ledger is not None:
        ledger.close()
    lane = config.stash.get(_LANE, None)
    if lane is not None:
        lanes.leave(lane)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every test under tests/cluster needs the simulated cluster: marked so, whether or not
    # its module says it, so that -m "not cluster" leaves none of them in.
    for item in items:
        if "cluster" in item.path.parts[-2:-1] and not item.get_closest_marker("cluster"):
            item.add_marker(pytest.mark.cluster)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@pytest.fixture(autouse=True, scope="session")
def _no_terminal_size() -> Iterator[None]:
    # preflight keeps its lines whole where its output is a pipe, whatever COLUMNS says; a
    # terminal's lines it fits to COLUMNS. pytest-xdist's workers inherit a COLUMNS of 80
    # from somewhere in pytest, and a developer's shell may export its own: the tests that
    # read lines should not depend on either.
    saved = {k: os.environ.pop(k) for k in ("COLUMNS", "LINES") if k in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(autouse=True, scope="session")
def _results_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Every preflight the tests start writes its results log here, not in ~/.local/state.
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        del os.environ["XDG_STATE_HOME"]
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A cluster test that fails gets the machine's state beside it: what the kernel said
    (the OOM killer, a full table), memory and disk. A signal from outside the test leaves
    no other trace, and CI shows only the failure's text."""
    report = yield
    if os.environ.get("CI"):
        unproven = _unproven(report, gpu=item.get_closest_marker("gpu") is not None)
        if unproven:
            report.outcome = "failed"
            report.longrepr = unproven
    if report.failed and call.when == "call" and item.get_closest_marker("cluster"):
        report.sections.append(("machine state when it failed", _machine_state()))
        logs = _sshd_logs(item)
        if logs:
            report.sections.append(("what the simulated hosts' sshd logged", logs))
    return report


# The one reason a test may skip in CI: CI has no GPU. A GPU test that skips for any other
# reason there (a missing library, a broken build) has proven nothing either.
NO_GPU = "no NVIDIA GPU on this machine"


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    return str(report.longrepr[2] if isinstance(report.longrepr, tuple)
               else report.longrepr).removeprefix("Skipped: ")


def _unproven(report: pytest.TestReport | pytest.CollectReport, gpu: bool) -> str:
    """Why a report proved nothing in CI ("" when it did): a skip (a missing namespace,
    Slurm, image or tool), which passes silently in the count, other than a GPU test's for
    want of a GPU; an expected failure, failed or passed, whose assertion nobody reads."""
    if hasattr(report, "wasxfail"):
        return f"marked xfail, which CI does not allow: {report.wasxfail or 'no reason given'}"
    if not report.skipped:
        return ""
    why = _skip_reason(report)
    if gpu and why == NO_GPU:
        return ""
    return f"skipped in CI, where only the GPU tests may skip, for want of a GPU: {why}"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module that skips itself whole (pytest.skip(allow_module_level=True), a failed
    importorskip) is held to the rule of its tests: in CI it fails unless it is a GPU test
    module without a GPU."""
    report = yield
    if os.environ.get("CI") and isinstance(collector, pytest.Module):
        # A module that skipped cannot be imported again to read its marks: tests/gpu is the
        # GPU tests' folder.
        unproven = _unproven(report, gpu="gpu" in collector.path.parts[-2:-1])
        if unproven:
            report.outcome = "failed"
            report.longrepr = unproven
    return report


def _sshd_logs(item: pytest.Item) -> str:
    """What every sshd of the testbeds the test used logged that was not routine, and the
    connections with no end in its log: their session process was killed (a signal from
    outside the test, the OOM killer), where the client closing or the network breaking is
    logged."""
    beds = [getattr(v, "tb", v) for v in getattr(item, "funcargs", {}).values()]
    out = []
    for tb in beds:
        if isinstance(tb, testbed.Testbed):
            for host in tb.hosts.values():
                said = tb.sshd_unusual(host.name)
                if said:
                    out.append(f"--- {host.name}\n{said}")
    return "\n".join(out)


def _machine_state() -> str:
    out = []
    # Not the bridges' and veths' lines: testbeds made later bury everything else.
    for argv in (["sh", "-c", "dmesg 2>/dev/null | grep -vE 'br0|veth|unregistering|"
                  "entered|: port [0-9]' | tail -n 15"], ["free", "-m"],
                 ["df", "-h", "/tmp", "/var/tmp"], ["cat", "/proc/loadavg"],
                 ["sh", "-c", "ps -eo pid,ppid,etimes,stat,args --sort=-etimes | "
                  "grep -E 'paddle|preflight-ar|iperf3' | grep -v grep | head -n 30"]):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            out.append(f"$ {' '.join(argv)}\n{p.stdout}{p.stderr}")
        except (OSError, subprocess.TimeoutExpired) as e:
            out.append(f"$ {' '.join(argv)}: {e}")
    return "\n".join(out)


def _unavailable(reason: str) -> None:
    # Skipped here, failed in CI (pytest_runtest_makereport): there it proves nothing.
    pytest.skip(f"simulated cluster unavailable: {reason}")


def require_testbed() -> None:
    """For a test module that builds a testbed of its own: fails in CI, skips elsewhere,
    when this machine cannot build one."""
    why = testbed.can_run()
    if why:
        _unavailable(why)


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    report: dict[str, Any]

    def findings(self, check: str | None = None, status: str | None = None,
                 ) -> list[dict[str, Any]]:
        return [f for f in self.report.get("findings", [])
                if (check is None or f["check"] == check)
                and (status is None or f["status"] == status)]


class Cluster:
    """The testbed plus a way to run the real preflight CLI from its client namespace."""

    paddle_a = PADDLE_A
    paddle_b = PADDLE_B
    starved_cores = STARVED_CORES
    link_rate = LINK_RATE
    bad_ifname = BAD_IFNAME
    stuck_shell_s = STUCK_SHELL_S
    drift_clock_s = DRIFT_CLOCK_S
    train_py = TRAIN_PY

    def __init__(self, tb: testbed.Testbed) -> None:
        self.tb = tb

    def left_on(self, hosts: Sequence[str], words: Sequence[str],
                tmp_prefix: Optional[str] = None) -> dict[str, list[str]]:
        """What is still running on each host with one of words in its command line, and
        (tmp_prefix) what lies in its /tmp under that prefix: a test's traces, of which
        there must be none."""
        left = {}
        for name in hosts:
            found = [c for c in self.tb.commands(name) if any(w in c for w in words)]
            if tmp_prefix:
                found += [f for f in os.listdir(self.tb.hosts[name].tmp)
                          if f.startswith(tmp_prefix)]
            if found:
                left[name] = found
        return left

    def inventory(self, name: str, hosts: Sequence[str], **kw: Any) -> str:
        kw.setdefault("python", PADDLE_A)
        return self.tb.inventory(os.path.join(self.tb.base, name), hosts, **kw)

    def policy(self, name: str, text: str = "") -> str:
        """Writes a policy file (with SHARED_CPU's limits) in the testbed; returns its path."""
        path = os.path.join(self.tb.base, name)
        with open(path, "w") as fh:
            fh.write(text + SHARED_CPU)
        return path

    def cli(self, *args: str, timeout: float = 180.0) -> Run:
        """Runs the CLI as it is given (no report), from the client namespace."""
        cmd = self.tb.client_cmd([sys.executable, "-m", "preflight", *args])
        env = dict(os.environ, PYTHONSAFEPATH="1")
        start = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           cwd=self.tb.base, env=env)
        return Run(p.returncode, p.stdout, p.stderr, time.monotonic() - start, {})

    def private(self, name: str, path: str) -> str:
        """Returns where the host's private /root/x or /tmp/x lies on this machine."""
        top, _, rest = path.strip("/").partition("/")
        return os.path.join(self.tb.hosts[name].dir, top, rest)

    def preflight(self, *args: str, timeout: float = 180.0, network: bool = False) -> Run:
        """Runs the CLI; the active tests (iperf3, all-reduce) only when network is True."""
        import json

        if args and args[0] == "check" and not network:
            args = (*args, "--no-network-tests")
        report_path = os.path.join(self.tb.base, f"report-{time.monotonic_ns()}.json")
        cmd = self.tb.client_cmd([sys.executable, "-m", "preflight", *args,
                                  "--json", report_path])
        env = dict(os.environ, PYTHONSAFEPATH="1")  # never import the source folder
        start = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           cwd=self.tb.base, env=env)
        wall = time.monotonic() - start
        report: dict[str, Any] = {}
        if os.path.exists(report_path):
            with open(report_path) as fh:
                report = json.load(fh)
        return Run(p.returncode, p.stdout, p.stderr, wall, report)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    why = testbed.can_run()
    if why:
        _unavailable(why)
    for py in (PADDLE_A, PADDLE_B):
        if not os.access(py, os.X_OK):
            _unavailable(f"{py} missing: run scripts/setup.sh (builds the Paddle test envs)")
    shm_before = set(os.listdir(testbed.SHM))
    tb = testbed.Testbed(len(HOSTS), names=HOSTS)
    try:
        tb.stop_sshd("dead")
        tb.hang("hung", seconds=FAULT_LIFETIME_S)
        tb.change_host_key("rekeyed")  # known_hosts keeps the key it had before
        tb.limit_cpu("starved", STARVED_CORES)
        # Like a .bashrc waiting on a dead NFS mount: bash (root's shell) reads it for every
        # SSH command, before our command and its remote time limit even start.
        with open(os.path.join(tb.hosts["stuck"].dir, "root", ".bashrc"), "w") as fh:
            fh.write(f"sleep {STUCK_SHELL_S}\n")
        # "drift": a host whose configuration differs in every way a job notices.
        tb.set_mtu("drift", 1400)
        tb.hold_port("drift", 6070, seconds=FAULT_LIFETIME_S)
        faketime = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
        if not faketime:
            _unavailable("libfaketime missing: run scripts/setup.sh (Debian package faketime)")
        tb.login_env("drift", ["export NCCL_DEBUG=INFO",
                               f"export LD_PRELOAD={faketime[0]} FAKETIME=+{DRIFT_CLOCK_S}s"])
        for name in ("good1", "good2", "good3"):
            tb.write_file(name, TRAIN_PY, "batch_size = 64\n")
        tb.write_file("drift", TRAIN_PY, "batch_size = 32\n")
        for name in HOSTS:
            tb.throttle(name, SLOW_RATE if name == "slow" else LINK_RATE)
        tb.login_env("badrank", [f"export GLOO_SOCKET_IFNAME={BAD_IFNAME}"])
        tb.fill_tmp("tmpfull")  # "flaky" gets its cable pulled by the test that needs it
        yield Cluster(tb)
    finally:
        tb.close()
        testbed.remove_faketime_leftovers(shm_before)

