"""The active tests for real: iperf3 between simulated hosts (one throttled with tc tbf) and
a gloo all-reduce launched with Paddle's own launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support import interruptible

from preflight.network.allreduce_cmd import AllReduceOptions
from preflight.testing.rig.system import SILENT_LISTENER

pytestmark = pytest.mark.cluster

GOOD = ["good1", "good2", "good3"]
HANG_S = 600  # how long a launcher that never joins would wait
GOOD4 = [*GOOD, "good4"]
# One-second iperf3 runs with no warm-up left out (no loss is judged here: the bandwidth
# check's unit tests judge it), one all-reduce size where sizes are not what a test names.
FAST = ("--iperf-seconds", "1", "--iperf-warmup", "0", "--allreduce-sizes", "1")
IPERF = ("--iperf-seconds", "1", "--iperf-warmup", "0")


def by_host(run, check):
    return {h: f for f in run.findings(check) for h in f["hosts"]}


def _traces(cluster, hosts):
    left = {}
    for name in hosts:
        procs = [c for c in cluster.tb.commands(name)
                 if "iperf3" in c or ".preflight-ar-" in c]
        files = [f for f in os.listdir(cluster.tb.hosts[name].tmp) if f.startswith(".preflight")]
        if procs or files:
            left[name] = procs + files
    return left


@pytest.fixture(autouse=True)
def earlier_traces(cluster):
    """What earlier tests left on the hosts (they failed for it): not this test's doing."""
    cluster.earlier_traces = _traces(cluster, cluster.tb.hosts)
    yield
    cluster.earlier_traces = {}


def traces(cluster, hosts):
    """Returns what this test's preflight left running or lying on the hosts: iperf3
    servers, launcher processes, run directories."""
    earlier = getattr(cluster, "earlier_traces", {})
    left = {}
    for name, items in _traces(cluster, hosts).items():
        new = [x for x in items if x not in earlier.get(name, ())]
        if new:
            left[name] = new
    return left


def launcher_wrapper(cluster, host, name, when_launching):
    """Writes an interpreter for host that runs the shell lines when_launching when asked to
    start Paddle's launcher (before starting it, unless they exec), Paddle's python else."""
    return cluster.tb.write_file(host, f"/root/{name}", mode=0o755, data=(
        '#!/bin/sh\nif [ "$2" = paddle.distributed.launch ]; then\n' + when_launching
        + f'fi\nexec {cluster.paddle_a} "$@"\n'))


def test_throttled_host_is_named_slow_not_its_peers(cluster):
    # Five hosts, one behind a link shaped to a tenth of the others': the all-reduce runs over
    # the four the job could use, at its default sizes, and only slow is blamed.
    hosts = [*GOOD4, "slow"]
    run = cluster.preflight("check", "-i", cluster.inventory("throttled.yaml", hosts), *FAST,
                            network=True)
    assert run.rc == 1, run.stdout + run.stderr
    assert run.report["verdict"] == "no-go"
    slow = run.findings("bandwidth", "fail")
    assert [f["hosts"] for f in slow] == [["slow"]], run.stdout
    assert slow[0]["message"].startswith("slow: slow host: sends at most")
    assert "retest against good" in slow[0]["message"]
    assert all("slow" in r or r.startswith("plan: ") for r in run.report["reasons"]), \
        "\n".join(run.report["reasons"]) + "\n" + json.dumps(
            (run.report["network"] or {}).get("allreduce"), indent=1)[:6000]
    # Its peers are not blamed: none fails, none is called slow. A retransmit warning on a
    # healthy link is the loss judgement's own question (its unit tests), not this test's.
    peers = [f for f in run.findings("bandwidth") if f["status"] != "pass"
             and set(f["hosts"]) & set(GOOD4)]
    assert all(f["status"] == "warn" and "loss_pct" in f["data"] for f in peers), peers
    assert {h for f in run.findings("bandwidth") for h in f["hosts"]} == set(hosts)
    links = run.report["network"]["links"]
    assert all(x["error"] is None for x in links), links
    healthy = sorted(x["received_bps"] for x in links if "slow" not in (x["sender"],
                                                                          x["receiver"]))
    median = healthy[len(healthy) // 2]
    for x in links:  # shaped to a tenth: well under a fifth of the healthy median
        if "slow" in (x["sender"], x["receiver"]):
            assert x["received_bps"] < median / 5, (x, median)
    # slow was retested alone before it was blamed (a noisy healthy pair may be retested
    # too, and cleared: only slow is named above).
    assert any("slow" in (x["sender"], x["receiver"]) for x in links if x["phase"] == "retest")
    # ... and judged against a healthy link measured again among its retests, which reached
    # far more in those same minutes.
    beside = slow[0]["data"]["alongside"]
    assert beside is not None and "slow" not in (beside["sender"], beside["receiver"])
    assert any(x["phase"] == "retest" and (x["sender"], x["receiver"]) == (
        beside["sender"], beside["receiver"]) for x in links)
    assert beside["bps"] > 5 * max(x["received_bps"] for x in links
                                   if x["phase"] == "retest" and "slow" in (x["sender"],
                                                                            x["receiver"]))
    # The all-reduce certified the four the job could use: slow was not a rank.
    ar = run.report["network"]["allreduce"]
    assert ar["error"] is None and ar["hosts"] == GOOD4 and ar["ranks"] == 4
    assert list(run.report["network"]["allreduce_left_out"]) == ["slow"]
    [passed] = run.findings("allreduce")
    assert passed["status"] == "pass" and "left out by the plan: slow" in passed["message"]
    assert traces(cluster, hosts) == {}


def test_a_cpu_starved_host_has_its_slow_links_put_on_its_cpu_not_its_cable(cluster):
    # starved: 3 % of a core for this test (a quarter for the others): far too
    # little for iperf3 to fill a 1 Gbit/s link (a tenth fills 40-70 % of it, which a retest
    # may find within the spread of healthy links). Its cable is fine: the finding must say
    # its CPU.
    cluster.tb.limit_cpu("starved", 0.03)
    try:
        run = cluster.preflight("check", "-i", cluster.inventory("starved-net.yaml",
                                                                 [*GOOD, "starved"]),
                                *IPERF, "--no-allreduce", "--no-paddle",
                                network=True)
    finally:
        cluster.tb.limit_cpu("starved", cluster.starved_cores)
    assert run.rc == 1, run.stdout + run.stderr
    # One fault, one finding: cpu-cores' names the cause, its slow links are its evidence,
    # and no bandwidth finding of their own names the host or blames a cable or a switch.
    cpu = by_host(run, "cpu-cores")["starved"]
    assert cpu["status"] == "fail" and "it explains what bandwidth saw: its links are slow: " \
        in cpu["message"], cpu["message"]
    assert not [f for f in run.findings("bandwidth") if f["status"] != "pass"], \
        run.findings("bandwidth")
    evidence = cpu["data"]["evidence"]
    [slow] = [e for e in evidence if e["hosts"] == ["starved"]]
    assert slow["message"].startswith("starved: slow host, explained by its CPU (0.03 "
                                      "effective cores"), slow["message"]
    for e in evidence:  # whatever else its links showed (a slower path to it, loss)
        assert e["check"] == "bandwidth" and "starved" in e["hosts"], e
        assert "fix its CPU first" in e["message"] and "cable" not in e["message"], e


def test_a_job_sized_to_the_good_hosts_is_go_and_says_what_the_slow_one_costs(cluster):
    hosts = [*GOOD4, "slow"]
    run = cluster.preflight("check", "-i", cluster.inventory("sized.yaml", hosts),
                            *IPERF, "--nnodes", "4", network=True)
    assert run.rc == 0, run.stdout + run.stderr
    plan = run.report["plan"]
    assert [n["host"] for n in plan["nodes"]] == GOOD4 and list(plan["excluded"]) == ["slow"]
    assert run.report["network"]["allreduce"]["hosts"] == GOOD4
    # Keeping slow would make every all-reduce wait on its link: shaped to a tenth, the
    # prediction is several times slower (5 ranks at its rate vs 4 at the slowest of the
    # others' links, which a loaded CPU lowers: the ratio of those two, not of the medians).
    links = run.report["network"]["links"]
    healthy = [x["received_bps"] for x in links if "slow" not in (x["sender"], x["receiver"])
               and x["received_bps"]]
    slowest = max(x["received_bps"] for x in links if "slow" in (x["sender"], x["receiver"]))
    ratio = min(healthy) / slowest
    cost = plan["costs"]["slow"]
    assert cost["factor"] > 2 and cost["factor"] > 0.9 * ratio, (cost, ratio)
    assert "left out slow: bandwidth: slow host" in run.stdout
    assert "with it, 32 MiB all-reduce" in run.stdout


def test_two_slow_senders_of_three_are_confirmed_and_their_receiver_not_blamed(cluster):
    # good1 and good2 send at a tenth of the link rate, good3 is sound: good3 then receives
    # only slow links, and every host is suspect in some direction, none free of suspicion
    # to retest against. Each is retested against the best host left: good1 and good2 are
    # confirmed against each other (neither receives slowly); good3's slow receiving is
    # theirs, and it is not blamed.
    senders = ["good1", "good2"]
    try:
        for name in senders:
            subprocess.run(["ip", "netns", "exec", cluster.tb.hosts[name].ns, "tc", "qdisc",
                            "change", "dev", "eth0", "root", "tbf", "rate", "100mbit",
                            "burst", "64kb", "latency", "50ms"], check=True, timeout=30)
        run = cluster.preflight("check", "-i", cluster.inventory("two-slow.yaml", GOOD),
                                *IPERF, "--no-allreduce", "--no-paddle", network=True)
    finally:
        for name in senders:
            cluster.tb.unthrottle(name)
            cluster.tb.throttle(name, cluster.link_rate)
    assert run.rc == 1, run.stdout + run.stderr
    fails = run.findings("bandwidth", "fail")
    assert sorted(h for f in fails for h in f["hosts"]) == senders, run.stdout
    for f in fails:
        assert "slow host: sends at most" in f["message"] and "retest against good" in \
            f["message"], f["message"]
    [good3] = [f for f in run.findings("bandwidth") if "good3" in f["hosts"]]
    assert good3["status"] == "warn" and good3["hosts"] == ["good3"], good3
    assert good3["message"].startswith("good3: could not judge its own links: receives at "
                                       "most"), good3["message"]
    links = run.report["network"]["links"]
    assert any(x["phase"] == "retest" and x["receiver"] == "good3" for x in links), links
    assert traces(cluster, GOOD) == {}


def test_matrix_measures_every_ordered_pair(cluster):
    run = cluster.preflight("check", "-i", cluster.inventory("matrix.yaml", GOOD),
                            "--network-matrix", *IPERF, "--no-allreduce",
                            network=True)
    assert run.rc == 0, run.stdout + run.stderr
    net = run.report["network"]
    assert net["schedule"] == "matrix" and net["allreduce"] is None
    pairs = [(x["sender"], x["receiver"]) for x in net["links"] if x["phase"] == "survey"]
    assert sorted(pairs) == sorted((a, b) for a in GOOD for b in GOOD if a != b)
    assert not run.findings("allreduce")  # turned off: no finding either way


def test_failing_rank_is_named_with_what_its_log_said(cluster):
    # good3 passes every check before the all-reduce; only its launcher is told to bind gloo
    # to an interface it lacks (a host whose env fails that check is not a rank at all).
    bad = launcher_wrapper(cluster, "good3", "badrank-python", (
        f'  GLOO_SOCKET_IFNAME={cluster.bad_ifname} exec {cluster.paddle_a} "$@"\n'))
    hosts = GOOD
    inv = cluster.inventory("badrank.yaml", hosts, overrides={"good3": {"python": bad}})
    limit = 60
    start = time.monotonic()
    run = cluster.preflight("check", "-i", inv, *FAST, "--allreduce-timeout", str(limit),
                            network=True)
    assert run.rc == 1, run.stdout + run.stderr
    assert run.report["network"]["allreduce"]["hosts"] == GOOD  # a rank, until it failed
    failed = run.findings("allreduce", "fail")
    assert failed and failed[0]["hosts"] == ["good3"], run.stdout
    assert cluster.bad_ifname in failed[0]["message"], failed[0]["message"]
    assert time.monotonic() - start < limit  # cut off after a grace, not at its limit
    assert traces(cluster, hosts) == {}


def good3_named_alone(cluster, run, outcome):
    """Asserts that the all-reduce ended as outcome with good3 alone blamed: the others
    waited for it and stay in the plan, nothing is left on the hosts. Returns the run's
    all-reduce record and good3's finding."""
    assert run.rc == 1, run.stdout + run.stderr
    ar = run.report["network"]["allreduce"]
    if ar["outcome"] != outcome:  # in full (an assertion's message is cut short)
        print(json.dumps(ar, indent=1), run.stdout, run.stderr, sep="\n")
    assert ar["outcome"] == outcome, ar
    [failed] = run.findings("allreduce", "fail")
    assert failed["hosts"] == ["good3"], run.stdout
    assert [n["host"] for n in run.report["plan"]["nodes"]] == ["good1", "good2"]
    assert traces(cluster, GOOD) == {}
    return ar, failed["message"]


def test_a_rank_that_never_joins_is_named_alone_and_every_host_cleaned(cluster):
    # good3's interpreter starts Paddle's launcher as a process that says why it waits and
    # then never does anything: the other launchers wait for it at the rendezvous until the
    # launch stops progressing.
    hang = launcher_wrapper(cluster, "good3", "hang-python", (
        '  echo "connecting to the master: no route to host" >&2\n'
        f'  exec python3 -c "import time; time.sleep({HANG_S})" "$@"\n'))
    inv = cluster.inventory("hang.yaml", GOOD, overrides={"good3": {"python": hang}})
    start = time.monotonic()
    run = cluster.preflight("check", "-i", inv, *FAST, network=True)
    ar, message = good3_named_alone(cluster, run, "never-joined")
    assert "never joined the rendezvous: its launcher never reached" in message
    assert "nothing progressed for" in message and "good1, good2 waited for it" in message
    # Stopped, its host command still printed its log's tail: what the launcher said.
    assert "its log last said: connecting to the master: no route to host" in message, message
    assert ar["progress"]["good1"] == "launcher waited for peers but started no worker"
    # Cut once nothing progressed for its idle window (30 s or twice the measured import),
    # long before the hung launcher would have ended by itself.
    assert time.monotonic() - start < HANG_S / 4


def test_a_rank_that_stops_after_joining_is_named_alone(cluster):
    # good3's launcher runs normally; a watcher beside it freezes good3's rank (SIGSTOP) as
    # soon as it has joined: the others block inside the collective, waiting for it.
    stop = launcher_wrapper(cluster, "good3", "stop-python", (
        "  ( i=0; while [ $i -lt 1200 ]; do\n"
        "      for f in /tmp/.preflight-ar-*/progress.*; do\n"
        '        if [ -f "$f" ] && grep -q \'"e": "join"\' "$f"; then\n'
        "          pid=$(sed -n 's/.*\"pid\": \\([0-9]*\\).*/\\1/p' \"$f\" | head -n 1)\n"
        '          kill -STOP "$pid"; exit 0\n'
        "        fi\n"
        "      done; i=$((i+1)); sleep 0.1\n"
        "    done ) &\n"))
    inv = cluster.inventory("stop.yaml", GOOD, overrides={"good3": {"python": stop}})
    start = time.monotonic()
    run = cluster.preflight("check", "-i", inv, *IPERF, "--allreduce-sizes", "1,64",
                            network=True)
    _, message = good3_named_alone(cluster, run, "stalled")
    assert "stopped: no heartbeat for" in message
    # Found by its heartbeat (10 s), long before the all-reduce's time limit.
    assert time.monotonic() - start < AllReduceOptions().timeout / 6


# The all-reduce alone, from the client namespace, on connections as the CLI opens them.
ALLREDUCE = """\
import json, sys
from preflight.inventory import load
from preflight.network.allreduce import run_allreduce
from preflight.network.allreduce_cmd import AllReduceOptions
from preflight.network.paddle_job import Member
from preflight.transport.ssh import connect as ssh
from preflight.transport.ssh.channel import SshRemote
members = []
for h in load(sys.argv[1]):
    conn = ssh.connection(h, 10.0, False)
    conn.open()
    members.append(Member(h.name, SshRemote(h.name, conn), h.python, h.address))
r = run_allreduce(members, "gloo", AllReduceOptions(port=int(sys.argv[2]), sizes_mib=(1.0,),
                                                    iters=2, timeout=90))
print(json.dumps({"error": r.error, "failed": dict(r.failed), "outcome": r.outcome}))
"""


def test_a_master_port_taken_after_the_ports_check_is_named_not_waited_on(cluster):
    # Something listens on the master's port by the time the launchers start (a job's master
    # left running, a process given the port since the ports check): Paddle's launcher would
    # take it for its master, and every launcher would wait for peers until the deadline.
    port = 36911
    holder = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{cluster.tb.hosts['good1'].ns}", sys.executable, "-c",
         SILENT_LISTENER, "0.0.0.0", str(port), "150"], stdin=subprocess.DEVNULL)
    try:
        cluster.tb.wait_listening(["good1"], port)
        inv = cluster.inventory("master-held.yaml", GOOD)
        p = subprocess.run(cluster.tb.client_cmd([sys.executable, "-c", ALLREDUCE, inv,
                                                  str(port)]),
                           capture_output=True, text=True, timeout=150, cwd=cluster.tb.base,
                           env=dict(os.environ, PYTHONSAFEPATH="1"))
        assert p.returncode == 0, p.stdout + p.stderr
        out = json.loads(p.stdout.splitlines()[-1])
        assert out["outcome"] == "failed" and list(out["failed"]) == ["good1"], out
        assert out["failed"]["good1"].startswith(
            f"port {port}, the job's master, was taken before its launcher started "
            f"(pid {holder.pid}: {sys.executable} -c import socket"), out
        assert out["error"].startswith("the rank on good1 failed first"), out
    finally:
        holder.kill()
        holder.wait()
    assert not _traces(cluster, GOOD)  # the others' launchers were stopped and cleaned up


def test_no_network_tests_flag_skips_them(cluster):
    run = cluster.preflight("check", "-i", cluster.inventory("quiet.yaml", GOOD))
    assert run.rc == 0 and run.report["network"] is None
    assert not run.findings("bandwidth") and not run.findings("allreduce")


def snapshot(cluster, hosts):
    """Per host: how many processes run in its namespace, and every file under its private
    /tmp and /root (what a run must leave as it found it)."""
    out = {}
    for name in hosts:
        files = []
        for top in ("tmp", "root"):
            base = os.path.join(cluster.tb.hosts[name].dir, top)
            for d, _, names in os.walk(base):
                files += [os.path.relpath(os.path.join(d, n), base) for n in names]
        out[name] = (len(cluster.tb.commands(name)), sorted(files))
    return out


@pytest.mark.parametrize("when, sig", [("iperf3", signal.SIGINT),
                                       ("all-reduce", signal.SIGINT),
                                       ("all-reduce", signal.SIGTERM)])
def test_interrupt_during_tests_stops_everything_and_keeps_facts(cluster, when, sig):
    hosts = ["good1", "good2", "slow"]
    before = snapshot(cluster, hosts)
    report = os.path.join(cluster.tb.base, f"interrupted-{when}-{sig.name}.json")
    # iperf3 runs of 20 s; or short ones, then a 64 MiB all-reduce over the hosts the plan
    # keeps (slow is left out: not a rank).
    extra = (["--iperf-seconds", "20"] if when == "iperf3" else
             [*IPERF, "--allreduce-sizes", "64"])
    marker = "iperf3" if when == "iperf3" else ".preflight-ar-"
    proc = subprocess.Popen(cluster.tb.client_cmd(
        [sys.executable, "-m", "preflight", "check", "-i",
         cluster.inventory(f"sigint-{when}-{sig.name}.yaml", hosts), "--json", report, *extra]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cluster.tb.base,
        env=dict(os.environ, PYTHONSAFEPATH="1"), preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the test's processes run on a host
            if any(marker in c for h in hosts for c in cluster.tb.commands(h)):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no {marker} process appeared within 60 s")
        time.sleep(1.0)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out + err
    with open(report) as fh:
        doc = json.load(fh)
    assert doc["interrupted"] is True and doc["network"]["interrupted"] is True
    assert all(doc["hosts"][h]["status"] == "ok" for h in hosts)  # facts kept
    assert "Traceback" not in err
    assert traces(cluster, hosts) == {}
    end = time.monotonic() + 10  # sshd's session processes exit just after the channel
    while snapshot(cluster, hosts) != before and time.monotonic() < end:
        time.sleep(0.2)
    assert snapshot(cluster, hosts) == before

