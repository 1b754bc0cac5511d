"""The fault suite, on the simulated cluster: every way a host can fail, all in one run, each
its own finding with its stage and a reason an operator can act on; every host failing at
once; and a run killed with -9 whose results log keeps what it had learned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.cluster

DEADLINE = 8
OVERTIME_S = 60  # how long the "overtime" probe runs, far past the deadline
# Stand-in probe interpreters, on good1 (its address appears under several inventory names):
# each gets the probe on stdin and its arguments as the real python3 would.
WRAPPERS = {
    "garbage": "#!/bin/sh\ncat >/dev/null\necho 'Segmentation fault <html>not json'\n",
    "truncated": '#!/bin/sh\npython3 "$@" | head -c 300\n',
    "future": '#!/bin/sh\npython3 "$@" | sed \'s/"schema": 1,/"schema": 2,/\'\n',
    # The probe, made to run 5 s (its last --sample wins), killed after 1 s.
    "killed": ('#!/bin/sh\nexec 3<&0\npython3 "$@" --sample 5 <&3 &\npid=$!\nsleep 1\n'
               'kill -9 $pid\nwait $pid\n'),
    "overtime": f"#!/bin/sh\ncat >/dev/null\nsleep {OVERTIME_S}\n",
    "huge": '#!/bin/sh\ncat >/dev/null\nhead -c 6000000 /dev/zero | tr "\\0" x\n',
}
# name -> (stage, words the reason must contain)
EXPECTED = {
    "dead": ("connect", "connection refused"),
    "hung": ("connect", "sent no SSH banner"),
    "rekeyed": ("host-key", "host key CHANGED"),
    "unknown": ("host-key", "host key unknown"),
    "noauth": ("auth", "authentication refused for user 'root'"),
    "flaky": ("timeout", "stopped during probe"),
    "killed": ("probe", "probe killed by signal 9"),
    "garbage": ("parse", "not valid JSON"),
    "truncated": ("parse", "not valid JSON"),
    "future": ("parse", "schema 2; this preflight reads schema 1"),
    "overtime": ("probe", "ran past its"),
    "stuck": ("timeout", f"no answer within the {DEADLINE} s deadline"),
    "huge": ("probe", "printed more than 4 MiB"),
}


def fault_inventory(cluster, tmp_path) -> str:
    tb = cluster.tb
    for name, text in WRAPPERS.items():
        tb.write_file("good1", f"/root/fault-{name}", text, mode=0o755)
    tb.write_file("flaky", "/root/slow-probe", '#!/bin/sh\npython3 "$@" --sample 6\n',
                  mode=0o755)
    # known_hosts without good2's key: good2, inventoried as "unknown", is a host never seen.
    partial = str(tmp_path / "known_hosts_partial")
    with open(tb.known_hosts) as src, open(partial, "w") as dst:
        dst.writelines(line for line in src
                       if not line.startswith(tb.hosts["good2"].address + " "))
    stranger = str(tmp_path / "stranger_key")  # a key good3 does not authorise
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", stranger], check=True)
    addr = {n: {"address": tb.hosts[n].address} for n in tb.hosts}
    hosts = ["good1", "dead", "hung", "rekeyed", "stuck", "tmpfull", "flaky"]
    overrides = {
        "unknown": dict(addr["good2"], known_hosts=partial),
        "noauth": dict(addr["good3"], identity_file=stranger),
        "flaky": {"probe_python": "/root/slow-probe"},
        **{n: dict(addr["good1"], probe_python=f"/root/fault-{n}") for n in WRAPPERS},
    }
    names = hosts + [n for n in overrides if n not in hosts]
    path = os.path.join(tb.base, "faults.yaml")
    tb.inventory(path, hosts, overrides=overrides, python=cluster.paddle_a)
    # tb.inventory writes only sim hosts; add the aliases by hand, same defaults.
    import yaml

    with open(path) as fh:
        doc = yaml.safe_load(fh)
    for n in names:
        doc["hosts"].setdefault(n, {}).update(overrides.get(n, {}))
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    return path


def pull_cable_during_probe(cluster, name: str, done: threading.Event) -> threading.Thread:
    """Pulls the host's cable once its probe is running (bounded wait)."""
    def watch() -> None:
        end = time.monotonic() + 20
        while time.monotonic() < end and not done.is_set():
            if any("preflight-probe" in c for c in cluster.tb.commands(name)):
                time.sleep(0.3)
                cluster.tb.link_down(name)
                return
            time.sleep(0.05)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_every_fault_is_its_own_finding_in_one_bounded_run(cluster, tmp_path):
    inv = fault_inventory(cluster, tmp_path)
    done = threading.Event()
    watcher = pull_cable_during_probe(cluster, "flaky", done)
    try:
        run = cluster.preflight("check", "-i", inv, "--deadline", str(DEADLINE),
                                "--connect-timeout", "3", "--forks", "32", timeout=120)
    finally:
        done.set()
        watcher.join(5)
        cluster.tb.link_up("flaky")
    assert run.rc == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    # Bounded by the deadline: the hung, stuck and overtime hosts wait it out in parallel,
    # and none of them is waited for to the end.
    assert run.wall_s < min(OVERTIME_S, cluster.stuck_shell_s + DEADLINE), run.wall_s
    hosts = run.report["hosts"]
    got = {n: (h["failure"]["stage"], h["failure"]["reason"]) for n, h in hosts.items()
           if h["status"] == "failed"}
    assert set(got) == set(EXPECTED), got
    for name, (stage, words) in EXPECTED.items():
        assert got[name][0] == stage and words in got[name][1], (name, got[name])
    # The hosts that answered are checked as normal; the full /tmp is named, not fatal.
    assert hosts["good1"]["status"] == hosts["tmpfull"]["status"] == "ok"
    tmp = [f for f in run.findings("tmp") if f["status"] != "pass"]
    assert [(f["status"], f["hosts"]) for f in tmp] == [("fail", ["tmpfull"])]
    assert "tmpfull: /tmp has 0 MiB free" in tmp[0]["message"]
    # Every failed host is among the reasons for NO-GO; none passed anything it could not.
    reasons = " ".join(run.report["reasons"])
    assert all(name in reasons for name in EXPECTED)
    passed = {h for f in run.findings(status="pass") for h in f["hosts"]}
    assert passed.isdisjoint(EXPECTED)
    assert cluster.tb.leftovers() == {}


def test_every_host_failing_at_once_is_no_go_with_reasons(cluster, tmp_path):
    inv = fault_inventory(cluster, tmp_path)
    import yaml

    with open(inv) as fh:
        doc = yaml.safe_load(fh)
    doc["hosts"] = {n: doc["hosts"][n] for n in ("dead", "hung", "garbage", "noauth")}
    path = str(tmp_path / "all-bad.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh)
    run = cluster.preflight("check", "-i", path, "--deadline", str(DEADLINE),
                            "--connect-timeout", "3")
    assert run.rc == 1 and run.report["verdict"] == "no-go", run.stderr
    assert "Traceback" not in run.stderr
    assert all(any(n in r for r in run.report["reasons"])
               for n in ("dead", "hung", "garbage", "noauth"))
    assert run.report["plan"]["fits"] is False
    assert "NO-GO" in run.stdout


def test_kill_9_loses_nothing_the_run_had_learned(cluster, tmp_path):
    log = str(tmp_path / "run.jsonl")
    inv = cluster.inventory("kill9.yaml", ["good1", "good2", "stuck"])
    argv = ["check", "-i", inv, "--no-network-tests", "--log", log, "--deadline", "60"]
    proc = subprocess.Popen(cluster.tb.client_cmd([sys.executable, "-m", "preflight", *argv]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=cluster.tb.base, env=dict(os.environ, PYTHONSAFEPATH="1"))
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:  # good1 and good2 answer; stuck's shell sleeps 12 s
            if os.path.exists(log) and _answered(log) >= {"good1", "good2"}:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the two good hosts were not in the log within 60 s")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    out = str(tmp_path / "from-log.json")
    rep = cluster.cli("report", log, "--json", out, "--no-step-summary")
    assert rep.rc == 1, rep.stdout + rep.stderr
    assert "stopped before it finished" in rep.stderr and "2 of 3 hosts answered" in rep.stderr
    with open(out) as fh:
        doc = json.load(fh)
    assert doc["interrupted"] is True and doc["verdict"] == "no-go"
    assert doc["hosts"]["good1"]["status"] == doc["hosts"]["good2"]["status"] == "ok"
    assert doc["hosts"]["good1"]["facts"]["paddle"]["version"] == "3.3.1"
    assert doc["hosts"]["stuck"]["failure"]["stage"] == "interrupted"
    # The next run with that log (of any hosts: here good1 alone, quick) says what happened
    # and keeps the killed run's log aside.
    after = ["check", "-i", cluster.inventory("kill9-after.yaml", ["good1"]),
             "--no-network-tests", "--no-paddle", "--log", log]
    nxt = cluster.cli(*after)
    assert "an earlier run was stopped before it finished" in nxt.stderr, nxt.stderr
    aside = [n for n in os.listdir(tmp_path) if n.startswith("run.jsonl.stopped-")]
    assert len(aside) == 1 and f"preflight report {tmp_path / aside[0]}" in nxt.stderr
    again = cluster.cli(*after)  # announced once only
    assert "earlier run" not in again.stderr


def _answered(log: str) -> set[str]:
    names = set()
    with open(log) as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") == "host" and "probe" in rec:
                names.add(rec["name"])
    return names



def test_hostile_inventory_values_never_run_anything(cluster, tmp_path):
    from support import HOSTILE

    from preflight.config.errors import InputError
    from preflight.inventory import load

    marker = f"/tmp/pf-marker-{os.getpid()}"
    values = [v.format(m=marker) for v in HOSTILE] + [
        f"-oProxyCommand=touch {marker}", f"x\ntouch {marker}", f"--python=$(touch {marker})"]
    good = {"address": cluster.tb.hosts["good1"].address}
    accepted: dict[str, dict[str, str]] = {}
    tried = rejected = 0
    for field in ("name", "address", "user", "python", "probe_python", "identity_file",
                  "known_hosts"):
        for i, value in enumerate(values):
            name = value if field == "name" else f"{field.replace('_', '-')}{i}"
            entry = dict(good) if field == "name" else dict(good, **{field: value})
            one = str(tmp_path / "one.yaml")
            cluster.tb.inventory(one, ["good1"], python=cluster.paddle_a)
            _add_hosts(one, {name: entry})
            tried += 1
            try:
                load(one)
            except InputError as e:
                assert "\n" not in str(e)
                rejected += 1
            else:
                accepted[name] = entry
    assert accepted and rejected  # both paths are exercised
    inv = str(tmp_path / "hostile.yaml")
    cluster.tb.inventory(inv, ["good1"], python=cluster.paddle_a)
    _add_hosts(inv, accepted)
    run = cluster.preflight("check", "-i", inv, "--deadline", str(DEADLINE),
                            "--connect-timeout", "3")
    assert run.rc == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.report["hosts"]["good1"]["status"] == "ok"
    # Nothing ran: not here (the controller), not on the host the values pointed at.
    assert not os.path.exists(marker)
    assert not os.path.exists(cluster.private("good1", marker))
    print(f"hostile values: {tried} tried, {rejected} rejected, {len(accepted)} run")


def _add_hosts(path: str, hosts: dict[str, dict[str, str]]) -> None:
    import yaml

    with open(path) as fh:
        doc = yaml.safe_load(fh)
    doc["hosts"] = dict(doc.get("hosts") or {}, **hosts)
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)


def test_secrets_in_a_hosts_environment_reach_no_report_or_log(cluster, tmp_path):
    secret = f"s3cr3t-{os.getpid()}-value"
    out = {k: str(tmp_path / f"r.{k}") for k in ("junit", "markdown", "html", "log")}
    # The session's cluster is shared: tmpfull's login environment is put back afterwards,
    # and no later test's report carries the secret.
    with cluster.tb.login_env_for("tmpfull", [f"export NCCL_IB_API_TOKEN={secret}",
                                              f"export PADDLE_DB_PASSWORD={secret}",
                                              "export NCCL_SOCKET_NTHREADS=4"]):
        run = cluster.preflight("check", "-i", cluster.inventory("secret.yaml", ["tmpfull"]),
                                *(a for k, v in out.items() for a in (f"--{k}", v)),
                                "--no-step-summary")
    env = run.report["hosts"]["tmpfull"]["facts"]["env"]["vars"]
    assert env["NCCL_IB_API_TOKEN"] == env["PADDLE_DB_PASSWORD"] == "<redacted>"
    assert env["NCCL_SOCKET_NTHREADS"] == "4"  # the others keep their values
    texts = [run.stdout, run.stderr, json.dumps(run.report)]
    for path in out.values():
        with open(path, encoding="utf-8") as fh:
            texts.append(fh.read())
    assert all(secret not in t for t in texts)
