"""`preflight watch` on real jobs: a collective gloo job (Paddle 3.3.1) started by `preflight
launch` on three simulated hosts, watched from outside while a fault is planted mid-run: a
CPU quota on one host's cgroup (the straggler named on its host, nobody else), a stopped
rank (named at once, then the hang it causes), a killed rank (named, its peers' failures
its consequence), a slowed link, a link cut until the job dies of it (its host the cause,
its peers' deaths folded under it); and a healthy job in real shapes (two ranks a host, a
rank 0 that evaluates, a piped log, a clock ahead) run twice with one master, with nobody
named. The time from planting to the finding is printed for the benchmarks; the tests
assert who is named, never how fast."""

from __future__ import annotations

import collections
import contextlib
import glob
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from jobscripts import TRAIN_SHAPES, TRAIN_SHAPES_PATH
from jobscripts import TRAIN_WATCH as TRAIN
from jobscripts import TRAIN_WATCH_PATH as SCRIPT
from watchtools import cli_popen, first, held, rank_pid, records

from preflight.testing import testbed

pytestmark = pytest.mark.cluster

HOSTS = ["good1", "good2", "good3"]
SKEW_S = 8  # a host's clock ahead of the others' (no NTP, a VM resumed)
SHAPES_SCRIPT = TRAIN_SHAPES_PATH
SHAPES_STEPS = 150  # a run of the shaped job (about 60 s): its pace judged over many windows
# The shaped job's links: its all-reduce keeps them full (a network-bound job, as real
# data-parallel jobs often are).
SHAPED_LINK = "40mbit"


@dataclass
class Job:
    report: str
    launch: subprocess.Popen[str]


@pytest.fixture(scope="module")
def report(cluster) -> str:
    """The GO report of the three hosts, its plan the job's; the script on every host."""
    for name in HOSTS:
        cluster.tb.write_file(name, SCRIPT, TRAIN)
    inv = cluster.inventory("watch.yaml", HOSTS)
    run = cluster.preflight("check", "-i", inv, "--nnodes", str(len(HOSTS)))
    assert run.rc == 0, run.stdout + run.stderr
    path = os.path.join(cluster.tb.base, "watch-report.json")
    with open(path, "w") as fh:
        json.dump(run.report, fh)
    return path


def launch_args(cluster, report: str, steps: int, script: str = SCRIPT) -> list[str]:
    """preflight launch of the job for steps, the hosts' old logs removed first."""
    for name in HOSTS:
        for log in glob.glob(cluster.private(name, "/root/log/workerlog.*")):
            os.unlink(log)
    return ["launch", "--plan", report, "--timeout", "300", "--", os.path.basename(script),
            str(steps)]


# Alone (the machine's CPUs its own, not a lane's one): six ranks on one CPU wait for it in
# turn, and rank 0, busier by design, would rightly be named for that wait.
@pytest.mark.alone
def test_a_healthy_job_of_real_shapes_run_twice_is_watched_with_no_failure(cluster):
    """A job in the shapes real ones have: two ranks a host, rank 0 computing metrics each
    step (busier than its peers by design) and evaluating every 20 steps (its peers wait for
    it), global rank 5 writing to a pipe, good3's clock 8 s ahead (libfaketime for all it
    runs: launcher, ranks, the watch's sampler), every link shaped to 40 Mbit/s, which the
    job's own all-reduce keeps full (a network-bound job); run to its end, then launched
    again with the same master, watched from before the first start to after the second end.
    Nothing fails and nobody is blamed at any judgement; rank 0 is said as the job's shape
    (learned from its first steps, after its imports), the full links as a network-bound job,
    never a slow link; its ranks leaving one by one at each end (rank 0 last, tearing down
    busy) an ending, not a straggler; the one warning is the progress the watch cannot read
    (the piped rank), said with its fix.

    Its time: the job runs twice to its end (150 steps, about 50 s a run), watched from before
    its first start to after its second end; the machine's CPUs are its own (alone)."""
    for name in HOSTS:
        cluster.tb.write_file(name, SHAPES_SCRIPT, TRAIN_SHAPES)
    # The plan only (the network tests are other modules'): this test runs alone, its time
    # the whole suite's.
    checked = cluster.preflight("check", "-i", cluster.inventory("shapes.yaml", HOSTS),
                                "--nnodes", str(len(HOSTS)), "--nproc-per-node", "2",
                                "--no-network-tests")
    assert checked.rc == 0, checked.stdout + checked.stderr
    plan = os.path.join(cluster.tb.base, "shapes-report.json")
    with open(plan, "w") as fh:
        json.dump(checked.report, fh)
    faketime = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    assert faketime, "libfaketime missing: run scripts/setup.sh (Debian package faketime)"
    log = os.path.join(cluster.tb.base, "watch-shapes.jsonl")
    with cluster.tb.login_env_for("good3", [f"export LD_PRELOAD={faketime[0]} "
                                            f"FAKETIME=+{SKEW_S}s"]), busy_links(cluster):
        w = watch(cluster, plan, log, "--any-job", "--interval", "2", "--persist", "6",
                  "--for", "400")
        runs = []
        try:
            time.sleep(3)  # watching before the job starts
            for _ in range(2):  # the same plan: the same master, a new launch
                runs.append(cluster.cli(*launch_args(cluster, plan, SHAPES_STEPS, SHAPES_SCRIPT),
                                        timeout=200))
            time.sleep(5)  # and after it ended
        finally:
            w.send_signal(signal.SIGINT)
            out, err = w.communicate(timeout=60)
    assert [r.rc for r in runs] == [0, 0], [r.stdout + r.stderr for r in runs]
    rs = records(log)
    samples = [r for r in rs if r["type"] == "sample" and r["host"] == "good3"]
    skew = samples[-1]["sample"]["t"] - samples[-1]["at"]
    assert SKEW_S / 2 < skew < SKEW_S + 2, skew  # ahead as planted (less what receipt took)
    found = [r for r in rs if r["type"] == "finding"]
    seen = [(r["check"], r["status"]) for r in found]
    # Nothing failed, nothing went unjudged, nobody was blamed, at any judgement.
    blamed = [r["message"] for r in found if r["status"] not in ("pass", "skip", "warn")]
    assert blamed == [], blamed
    # Waiting for the job (skip), its starts (skip, while its launchers start its ranks),
    # its pace once every host runs it, what the job is by design (network-bound, a rank
    # busier from its start: said as passes), the piped rank's progress, its ends.
    assert seen[0] == ("watch", "skip"), out + err
    assert set(seen) <= {("watch", "skip"), ("starting", "skip"), ("progress", "pass"),
                         ("progress", "warn"), ("network", "pass"), ("shape", "pass"),
                         ("phase", "pass"), ("ending", "pass"), ("ended", "pass")}, out + err
    # What it is by design, said: rank 0 busier than its peers as from its first steps
    # (learned after its imports: the watch began before the launch), and the links its
    # all-reduce keeps full a network-bound job's, never a slow link (no straggler above).
    shapes = [r for r in found if r["check"] == "shape"]
    assert shapes and {tuple(r["hosts"]) for r in shapes} == {("good1",)}, out + err
    assert shapes[0]["message"].startswith("good1 rank 0 (worker) is busier than its peers")
    networks = [r for r in found if r["check"] == "network"]
    assert networks and "it is network-bound" in networks[0]["message"], out + err
    paces = [r for r in found if (r["check"], r["status"]) == ("progress", "pass")]
    assert paces and sorted(paces[0]["hosts"]) == HOSTS, paces[:1]
    assert "6 ranks of master " in paces[0]["message"], paces[0]["message"]
    warned = [r for r in found if r["status"] == "warn"]
    assert warned, out + err
    for r in warned:
        assert r["check"] == "progress" and r["hosts"] == ["good3"], r
        assert r["message"].startswith("could not check progress on good3: good3 rank 5 "
                                       "(worker) writes to pipe:["), r["message"]
        assert "call preflight.watch.step() once a step, or send its output to a file" \
            in r["message"]
    # Two runs of one master: the first one's clean end is its end, not a death beside the
    # second; both said ended, the first as the earlier run.
    last = [r for r in rs if r["type"] == "last"]
    assert sorted((r["check"], r["status"]) for r in last) == [("ended", "pass")] * 2, last
    assert sum("(run 1) ended by" in r["message"] for r in last) == 1, last
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_shapes")) == {}


@contextlib.contextmanager
def busy_links(cluster) -> Iterator[None]:
    """Every host's link shaped to SHAPED_LINK (both ways) while it runs; the cluster's rate
    back after."""
    try:
        for name in HOSTS:
            cluster.tb.unthrottle(name)
            cluster.tb.throttle(name, SHAPED_LINK)
        yield
    finally:
        for name in HOSTS:
            cluster.tb.unthrottle(name)
            cluster.tb.throttle(name, cluster.link_rate)


def test_a_rank_killed_mid_run_is_named_dead_on_its_host_and_nobody_else(cluster, report):
    """SIGKILL, as the OOM killer sends: the rank's log says nothing, gloo aborts its peers
    (their logs say so), the launch stops what is left. Named once: the killed rank, with
    its peers' failures as its consequence. Launched alone (the module's job runs after).
    The killed rank's host keeps a clock 8 s ahead of the others (libfaketime for all it
    runs: its launcher, its ranks, the watch's sampler): by its own clock the rank died
    after the peers it took down, and is still named as their cause."""
    faketime = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    assert faketime, "libfaketime missing: run scripts/setup.sh (Debian package faketime)"
    with cluster.tb.login_env_for("good3", [f"export LD_PRELOAD={faketime[0]} "
                                            f"FAKETIME=+{SKEW_S}s"]):
        launch = cli_popen(cluster, *launch_args(cluster, report, 10 ** 6), quiet=True)
        log = os.path.join(cluster.tb.base, "watch-kill.jsonl")
        w = None
        try:
            stepping(cluster, launch)
            w = watch(cluster, report, log, "--interval", "2", "--for", "90")
            running = first(log, "finding", "progress", time.monotonic() + 30)
            assert running is not None, "the watch never saw the job step"
            pid = rank_pid(log, "good3", time.monotonic() + 10)
            planted = time.time()
            os.kill(pid, signal.SIGKILL)
            dead = first(log, "finding", "dead", time.monotonic() + 40)
            assert launch.wait(60) != 0  # the launch saw the job fail and stopped it
            time.sleep(5)  # the watch's judgement of the ended job
        finally:
            out, err = stopped(launch, w)
    assert dead is not None, out + err
    samples = [r for r in records(log) if r["type"] == "sample" and r["host"] == "good3"]
    skew = samples[-1]["sample"]["t"] - samples[-1]["at"]
    assert SKEW_S / 2 < skew < SKEW_S + 2, skew  # ahead as planted (less what receipt took)
    print(f"\nkilled rank named {dead['at'] - planted:.1f} s after SIGKILL: {dead['message']}")
    assert dead["hosts"] == ["good3"] and dead["ranks"][0]["pid"] == pid, dead["message"]
    rs = records(log)
    named = {tuple(r["hosts"]) for r in rs if held(r)}
    assert named == {("good3",)}, [r["message"] for r in rs if r["type"] == "finding"]
    # Named at once on its host (the first judgement may see the launch's failure before
    # the peers' aborts); how the job ended, once every rank's end is in:
    [last] = [r for r in rs if r["type"] == "last"]
    assert last["check"] == "dead" and last["hosts"] == ["good3"], last
    assert "rank 2 (worker) exited at" in last["message"]
    assert "without a word in its log: killed by a signal it cannot catch" in last["message"]
    assert "2 peers failed after it: good1 rank 0 (worker), good2 rank 1 (worker)" in \
        last["message"]
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_watch")) == {}


def test_a_link_cut_until_the_job_dies_is_laid_on_its_host_its_victims_folded(cluster,
                                                                              report):
    """good2's cable pulled mid-run (its eth0 down) until gloo's timeout aborts its peers,
    then put back: its sampler's connection (on that link) goes quiet, the ranks of good1
    and good3 die for the peer they lost. good2 is the cause, named while it is silent and
    still once it answers again and its own rank's end (aborted too) comes in; its peers
    are its victims, folded under it, never failed on their own hosts. Launched alone.

    Its time: gloo's own timeout (the job dies of the cut only once it runs out) and the
    watch's judgement after the link is back."""
    launch = cli_popen(cluster, *launch_args(cluster, report, 10 ** 6), quiet=True)
    log = os.path.join(cluster.tb.base, "watch-cut.jsonl")
    w = None
    try:
        stepping(cluster, launch)
        w = watch(cluster, report, log, "--interval", "2", "--persist", "6", "--for", "200")
        assert first(log, "finding", "progress", time.monotonic() + 30) is not None
        planted = time.time()
        cluster.tb.link_down("good2")
        dead = first(log, "finding", "dead", time.monotonic() + 120)
        launch.wait(90)  # the job died of it (gloo's timeout), the launch with it
        cluster.tb.link_up("good2")
        mended = time.time()
        back = first(log, "cleared", "watch", time.monotonic() + 60)  # good2 answers
        time.sleep(8)  # its rank's end read, and judged
    finally:
        cluster.tb.link_up("good2")
        out, err = stopped(launch, w)
    assert dead is not None and back is not None, out + err
    rs = records(log)
    [last] = [r for r in rs if r["type"] == "last"]  # how the job's end is said at the end
    link = next((r for r in rs if r["type"] == "finding" and r["check"] == "straggler"), None)
    print((f"\nits link named {link['at'] - planted:.1f} s after eth0 down: {link['message']}"
           if link else "\nits link not named before the deaths")
          + f"\nlink cut named {dead['at'] - planted:.1f} s after eth0 down: {dead['message']}"
          f"\nanswering {back['at'] - mended:.1f} s after eth0 up; at the end: "
          f"{last['message']}")
    assert dead["hosts"] == ["good2"] and "went quiet as its peers lost it" in dead["message"]
    assert last["check"] == "dead" and last["hosts"] == ["good2"], last
    assert last["message"].startswith("good2 (silent for "), last["message"]
    assert "answering again) went quiet as its peers lost it" in last["message"]
    assert "2 peers failed after: good1 rank 0 (worker), good3 rank 2 (worker)" in \
        last["message"], last["message"]
    assert "its own ranks ended too, seen once it answered: good2 rank 1 (worker)" in \
        last["message"], last["message"]
    named = {tuple(r["hosts"]) for r in rs if held(r)}
    assert named == {("good2",)}, [r["message"] for r in rs if r["type"] == "finding"]
    assert sorted((v["host"], v["rank"]) for v in last["victims"]) == [
        ("good1", 0), ("good2", 1), ("good3", 2)], last
    end = time.monotonic() + 60  # good2's launcher ends once it hears its rank's end
    while time.monotonic() < end and cluster.left_on(HOSTS, ("paddle.distributed.launch",
                                                             "train_watch")):
        time.sleep(2)
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_watch")) == {}


@pytest.fixture(scope="module")
def job(cluster, report) -> Iterator[Job]:
    """The three-host job, running (every rank has printed steps) for the faults planted
    in it one after another, each undone; stopped at the end."""
    launch = cli_popen(cluster, *launch_args(cluster, report, 10 ** 6), quiet=True)
    try:
        stepping(cluster, launch)
        yield Job(report, launch)
    finally:
        launch.send_signal(signal.SIGINT)  # the launch stops the job on every host
        try:
            launch.wait(60)
        except subprocess.TimeoutExpired:
            launch.kill()
            launch.wait(10)
    assert cluster.left_on(HOSTS, ("paddle.distributed.launch", "train_watch")) == {}


def stopped(launch: subprocess.Popen[str],
            w: subprocess.Popen[str] | None) -> tuple[str, str]:
    """Stops a launch still running, then the watch (as Ctrl-C would); the watch's output."""
    if launch.poll() is None:
        launch.send_signal(signal.SIGINT)
        launch.wait(60)
    if w is None:
        return "", ""
    w.send_signal(signal.SIGINT)
    return w.communicate(timeout=60)


def stepping(cluster, launch: subprocess.Popen[str]) -> None:
    """Waits (120 s at most) until every rank of the launched job has printed steps."""
    logs = [cluster.private(n, "/root/log/workerlog.0") for n in HOSTS]
    end = time.monotonic() + 120
    while time.monotonic() < end and not all(_steps(p) >= 3 for p in logs):
        assert launch.poll() is None, launch.stderr.read() if launch.stderr else ""
        time.sleep(1)
    assert all(_steps(p) >= 3 for p in logs), "the job did not start stepping"


def _steps(path: str) -> int:
    try:
        with open(path) as fh:
            return sum(1 for line in fh if line.startswith("step "))
    except OSError:
        return 0


def watch(cluster, report: str, log: str, *args: str) -> subprocess.Popen[str]:
    return cli_popen(cluster, "watch", "--plan", report, "--log", log, *args)


def test_a_host_throttled_mid_run_is_named_as_the_straggler_and_nobody_else(cluster, job):
    log = os.path.join(cluster.tb.base, "watch-quota.jsonl")
    w = watch(cluster, job.report, log, "--interval", "2", "--persist", "10", "--for", "180")
    try:
        time.sleep(14)  # a healthy stretch first: nobody named there
        planted = time.time()
        cluster.tb.limit_cpu("good2", 0.1)
        found = first(log, "finding", "straggler", time.monotonic() + 70)
    finally:
        cluster.tb.unlimit_cpu("good2")
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=60)
    assert found is not None, out + err
    print(f"\nstraggler named {found['at'] - planted:.1f} s after the quota was set: "
          f"{found['message']}")
    capture = os.environ.get("PREFLIGHT_CAPTURE_WATCH")  # golden logs for the unit tests
    if capture:  # the watch's log up to the finding and a window after, the fault's time
        with open(capture, "w") as fh:
            fh.write(json.dumps({"type": "capture", "planted": round(planted, 3),
                                 "fault": "cpu.cfs_quota_us of 0.1 core on good2",
                                 "found": found["at"]}) + "\n")
            for r in records(log):
                if r["at"] <= found["at"] + 12:
                    fh.write(json.dumps(r, separators=(",", ":")) + "\n")
    assert found["hosts"] == ["good2"] and found["status"] == "fail"
    assert found["ranks"][0]["role"] == "worker"
    assert "its cgroup's CPU quota throttles it" in found["message"], found["message"]
    cores = testbed.usable_cpus()  # the host's cores at the check: its lane's
    assert f"0.1 of {cores:g} cores now: a cgroup quota set since; {cores:g} at the check" \
        in found["message"], found["message"]
    rs = records(log)
    before = [r for r in rs if held(r) and r["at"] < planted]
    assert before == []
    named = {tuple(r["hosts"]) for r in rs if held(r)}
    assert named == {("good2",)}
    start = rs[0]
    assert start["type"] == "start" and start["marker"]  # the launch's own marker
    # Every host's samples are kept, about one an interval (2 s) over the watch's time
    # (a count that depends on how soon the straggler was named is no measure of that).
    span = rs[-1]["at"] - start["at"]
    kept = collections.Counter(r["host"] for r in rs if r["type"] == "sample")
    assert sorted(kept) == ["good1", "good2", "good3"], kept
    assert min(kept.values()) >= 0.5 * span / 2, (kept, span)


def test_a_stopped_rank_is_named_at_once_and_the_hang_it_causes_after(cluster, job):
    log = os.path.join(cluster.tb.base, "watch-stop.jsonl")
    w = watch(cluster, job.report, log, "--interval", "2", "--persist", "6", "--for", "60",
              "--hang-after", "12")
    pid = None
    try:
        pid = rank_pid(log, "good3", time.monotonic() + 30)
        planted = time.time()
        os.kill(pid, signal.SIGSTOP)
        stopped = first(log, "finding", "stopped", time.monotonic() + 30)
        hang = first(log, "finding", "hang", time.monotonic() + 60)
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=60)
    assert stopped is not None and hang is not None, out + err
    print(f"\nstopped rank named {stopped['at'] - planted:.1f} s after SIGSTOP; "
          f"hang {hang['at'] - planted:.1f} s after: {hang['message']}")
    assert stopped["hosts"] == ["good3"] and stopped["ranks"][0]["pid"] == pid
    assert "rank 2 (worker) is stopped (state T" in stopped["message"]
    assert hang["hosts"] == ["good3"]
    assert "good3 rank 2 (worker) is stopped: it holds the rest" in hang["message"]
    assert "2 asleep in" in hang["message"]  # the others wait in the collective
    named = {tuple(r["hosts"]) for r in records(log)
             if held(r)}
    assert named == {("good3",)}


def _good2_slowed(cluster, job, name: str, then, sending_only: bool = False):
    """Watches the job while good2's link is shaped to 10 Mbit/s from 14 s in (both ways,
    or its sending side only) until the watch names a straggler and then(log) returns;
    restores the link. Returns the first straggler finding, the log and when it was shaped."""
    log = os.path.join(cluster.tb.base, name)
    w = watch(cluster, job.report, log, "--interval", "2", "--persist", "10", "--for", "180")
    try:
        time.sleep(14)  # a healthy stretch first
        planted = time.time()
        cluster.tb.unthrottle("good2")
        cluster.tb.throttle("good2", "10mbit", sending_only=sending_only)
        found = first(log, "finding", "straggler", time.monotonic() + 70)
        then(log)
    finally:
        cluster.tb.unthrottle("good2")
        cluster.tb.throttle("good2", cluster.link_rate)
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=60)
    assert found is not None, out + err
    return found, log, planted


def test_a_link_slowed_mid_run_is_named_on_its_host_and_nobody_else(cluster, job):
    def alone_then_a_while(log):
        # Which of good2's pairs are full changes from window to window, and a pair's other
        # end is no cause (on the rig it was failed alone, at times).
        end = time.monotonic() + 60
        while time.monotonic() < end and not any(
                r["type"] == "finding" and r["hosts"] == ["good2"] for r in records(log)):
            time.sleep(1)
        time.sleep(20)

    # Both ways, as a bad cable or port.
    found, log, planted = _good2_slowed(cluster, job, "watch-link.jsonl", alone_then_a_while)
    print(f"\nslow link named {found['at'] - planted:.1f} s after tc tbf: {found['message']}")
    # good2 alone; or, where a single pair to good2 stayed full (its sender's resends, and
    # its sender's empty qdisc, telling neither end), said as the link between the two ends
    # (a pair from good2 is good2's: its own shaper's queue stands in its qdisc).
    if found["hosts"] == ["good2"]:
        assert found["message"].startswith("good2's link holds the job"), found["message"]
    else:
        assert "good2" in found["hosts"] and len(found["hosts"]) == 2, found["message"]
        assert "either end's link, or the switch between them" in found["message"]
    said = [r for r in records(log) if held(r)]
    named = {tuple(r["hosts"]) for r in said}
    assert all("good2" in hosts for hosts in named), named  # no link without good2 named
    assert ("good2",) in named, named  # named alone once both its pairs filled
    alone = min(r["at"] for r in said if r["hosts"] == ["good2"])
    for r in said:  # before that, only a full pair of good2's, said as the link between
        if r["check"] == "straggler" and r["hosts"] != ["good2"]:
            assert len(r["hosts"]) == 2 and "good2" in r["hosts"] and r["at"] < alone, r
            assert "either end's link, or the switch between them" in r["message"], r
    after = {tuple(r["hosts"]) for r in records(log) if r["type"] == "finding"
             and r["status"] != "pass" and r["at"] >= alone}
    assert after == {("good2",)}, after  # and from then on nobody else, not even beside it


def test_a_sender_shaped_on_its_own_side_is_named_alone_never_its_receiver(cluster, job):
    # A tbf on good2's eth0 only: what it sends waits, what it receives does not. Its
    # receiver's end of the full pair is no cause: the standing queue in good2's own qdisc
    # tells its sending side (every rig host's link is shaped, at the rig's link rate: what
    # a shaper holds back at that rate tells nothing).
    found, log, planted = _good2_slowed(cluster, job, "watch-shaped.jsonl",
                                        lambda log: time.sleep(20), sending_only=True)
    print(f"\nshaped sender named {found['at'] - planted:.1f} s after tc tbf: "
          f"{found['message']}")
    assert found["hosts"] == ["good2"], found["message"]
    assert found["message"].startswith("good2's link holds the job"), found["message"]
    named = {tuple(r["hosts"]) for r in records(log) if held(r)}
    assert named == {("good2",)}, named  # at every judgement, nobody else
    # Where one pair alone was full (good2 to one peer), its own shaper told its end.
    for r in records(log):
        if held(r) and r["message"].count("->") == 1 and "in every full queue" not in \
                r["message"]:
            assert "its own tbf qdisc on eth0 holds a standing queue" in r["message"], \
                r["message"]


def test_a_samplers_dropped_session_is_said_started_again_and_blames_nobody(cluster, job):
    """The SSH session that runs good2's sampler dropped mid-watch (its sshd session killed,
    as a dropped connection or an sshd restarted under it): said as good2 could not be
    checked, started again after a backoff over a new connection, cleared once it answers;
    nobody blamed for the gap."""
    log = os.path.join(cluster.tb.base, "watch-drop.jsonl")
    w = watch(cluster, job.report, log, "--interval", "2", "--persist", "6", "--for", "70")
    said = cleared = None
    try:
        assert first(log, "finding", "progress", time.monotonic() + 40) is not None
        dropped = cluster.tb.drop_session("good2", "preflight-sampler")
        assert dropped is not None, cluster.tb.commands("good2")
        planted = time.time()
        said = first(log, "finding", "watch", time.monotonic() + 30)
        cleared = first(log, "cleared", "watch", time.monotonic() + 40)
        time.sleep(4)  # samples of good2 again, judged
    finally:
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=60)
    assert said is not None and cleared is not None, out + err
    print(f"\ndropped sampler said {said['at'] - planted:.1f} s after, answering again "
          f"{cleared['at'] - planted:.1f} s after: {said['message']}")
    assert said["hosts"] == ["good2"] and said["status"] == "could-not-check"
    assert "starting its sampler again in" in said["message"], said["message"]
    rs = records(log)
    assert any(r["type"] == "sample" and r["host"] == "good2" and r["at"] > cleared["at"]
               for r in rs)
    named = [r for r in rs if held(r) and r["status"] != "skip"
             and r["check"] != "watch"]
    assert named == [], [r["message"] for r in named]


def test_a_ctrl_c_of_the_launch_is_the_job_stopped_as_a_whole_and_nobodys_fault(cluster, job):
    """The module's last: Ctrl-C of the `preflight launch` that runs the job stops it on
    every host (a TERM to each rank, said in its log): the job was stopped, no rank died of
    it, no host is to blame."""
    assert job.launch.poll() is None, "the module's job is no longer running"
    log = os.path.join(cluster.tb.base, "watch-ctrl-c.jsonl")
    w = watch(cluster, job.report, log, "--interval", "2", "--persist", "6", "--for", "70")
    ended = None
    try:
        assert first(log, "finding", "progress", time.monotonic() + 40) is not None
        job.launch.send_signal(signal.SIGINT)
        assert job.launch.wait(60) != 0
        ended = first(log, "finding", "ended", time.monotonic() + 40)
        time.sleep(4)
    finally:
        w.send_signal(signal.SIGINT)
        out, err = w.communicate(timeout=60)
    assert ended is not None, out + err
    assert ended["status"] == "warn" and sorted(ended["hosts"]) == HOSTS, ended
    assert ended["cause"] == "job-stopped" and ended["ranks"] == []
    assert "was stopped as a whole" in ended["message"], ended["message"]
    blamed = [r for r in records(log) if r["type"] == "finding"
              and r["status"] in ("fail", "could-not-check")]
    assert blamed == [], [r["message"] for r in blamed]
