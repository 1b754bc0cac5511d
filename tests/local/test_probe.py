"""The probe run on this machine as hosts run it: from stdin, without root, without Paddle, its
addresses and JSON writer equal to ip and json, hostile interpreter paths never run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from probetools import probe_cmd, shipped_ns
from support import HOSTILE

from preflight.collect.fanout import probe_args, probe_payload, remote_command
from preflight.common.hostjob import CollectOptions
from preflight.model.host import Host


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_interpreter_paths_never_run(tmp_path, value):
    marker = tmp_path / "marker"
    hostile = value.format(m=marker)
    echo = tmp_path / "echo-args"
    echo.write_text("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n")
    echo.chmod(0o755)
    host = Host(name="n", address="10.0.0.1", python=hostile, probe_python=str(echo))
    cmd = remote_command(host, CollectOptions(), budget=5)
    # The login shell runs the command string: do exactly that here.
    out = subprocess.run(["/bin/bash", "-c", cmd], capture_output=True, text=True, timeout=10,
                         cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert not marker.exists()
    args = out.stdout.splitlines()
    assert args[args.index("--python") + 1] == hostile  # arrived as one literal argument
    assert sorted(p.name for p in tmp_path.iterdir()) == ["echo-args"]  # nothing written


def test_the_probe_runs_from_stdin_as_hosts_run_it(tmp_path):
    # The exact command a host gets, with the probe on stdin: one JSON document, no file
    # written (cwd and TMPDIR stay empty), Paddle skipped.
    host = Host(name="n", address="10.0.0.1", probe_python=sys.executable)
    cmd = remote_command(host, CollectOptions(paddle=False, cpu_sample_s=0.1), budget=20)
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = subprocess.run(["/bin/bash", "-c", cmd], input=probe_payload(),
                         capture_output=True, timeout=30, check=True, cwd=tmp_path, env=env)
    doc = json.loads(out.stdout)
    assert doc["schema"] == 1 and doc["cpu"]["sample_s"] == 0.1
    # CPU use counted where a job would run here, over at least the sample.
    work = doc["cpu"]["other_work"]
    assert work["window_s"] >= 0.1 and work["busy_cores"] >= 0
    assert work["scope"] == "host" or work["scope"].startswith("cgroup v")
    assert doc["system"]["hostname"] == os.uname().nodename
    assert list(tmp_path.iterdir()) == []


def test_probe_addresses_match_ip():
    # rtnetlink, read by hand in the probe, against iproute2's own reading of this machine.
    probe = shipped_ns()
    ours = probe["netlink_addresses"]()
    links = json.loads(subprocess.run(["ip", "-j", "addr", "show"], capture_output=True,
                                      check=True).stdout)
    theirs = {link["ifname"]: [f"{a['local']}/{a['prefixlen']}" for a in link["addr_info"]]
              for link in links if link.get("addr_info")}
    assert ours == theirs and ours["lo"][0] == "127.0.0.1/8"


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, None, True, False], "b": {"z": "é\u2028\"\\\n\x00", "y": -0.0}},
    {"big": 10 ** 30, "nan": float("nan"), "inf": float("-inf"), "t": (1, "x")},
    ["\ud800 lone surrogate", "\U0001F600", ""],
])
def test_probe_json_writer_matches_json(value):
    to_json = shipped_ns()["to_json"]
    text = to_json(value)
    expected = json.loads(json.dumps(value, sort_keys=True).replace("NaN", "null")
                          .replace("-Infinity", "null"))
    assert json.loads(text) == expected
    text.encode("ascii")  # always ASCII: any bytes a host prints decode the same


def _probe_with(tmp_path, script: str, opts: CollectOptions, budget: float):
    """(the training python, the probe's document) of the probe run as the hosts run it,
    with a training python that is the shell script given."""
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\n{script}\n")
    python.chmod(0o755)
    host = Host(name="n", address="10.0.0.1", python=str(python), probe_python=sys.executable)
    out = subprocess.run(probe_cmd(*probe_args(host, opts, budget=budget)),
                         capture_output=True, text=True, timeout=budget + 15, check=True)
    return python, json.loads(out.stdout)


def test_no_paddle_skips_the_import_and_says_so(tmp_path):
    # The probe, run as the hosts run it, with a training python that would record its start.
    marker = tmp_path / "paddle-started"
    _, doc = _probe_with(tmp_path, f"touch {marker}\nexit 1",
                         CollectOptions(paddle=False, cpu_sample_s=0.05), budget=20)
    assert doc["paddle"] == {"error": "not collected (preflight ran with --no-paddle)"}
    assert not marker.exists() and doc["cpu"]["logical"] >= 1


def test_a_paddle_import_past_the_deadline_is_said_with_the_deadline_and_ends(tmp_path):
    # A training python whose import hangs (a shared filesystem every host reads at once):
    # the probe still answers, within its budget, and its Paddle section says why, naming
    # the option that gives the import more time; the hung child does not outlive it.
    python, doc = _probe_with(tmp_path, "sleep 30", CollectOptions(cpu_sample_s=0.05),
                              budget=5)
    why = doc["paddle"]["error"]
    assert f"{python} did not finish importing paddle within " in why, why
    assert "--deadline" in why, why
    assert subprocess.run(["pgrep", "-f", str(python)], capture_output=True).returncode == 1


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK),
                    reason="needs root (to become nobody) and the system python3")
def test_the_probe_needs_no_root(tmp_path):
    # The host's command as user nobody: every section but the Paddle one (skipped) reads.
    host = Host(name="n", address="10.0.0.1", probe_python="/usr/bin/python3")
    cmd = remote_command(host, CollectOptions(paddle=False, cpu_sample_s=0.1), budget=20)
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          "/bin/sh", "-c", cmd], input=probe_payload(),
                         capture_output=True, timeout=30, check=True, cwd="/")
    doc = json.loads(out.stdout)
    errors = {k: v for k, v in doc.items() if isinstance(v, dict) and "error" in v}
    assert set(errors) == {"paddle"}, errors


def test_the_probe_and_the_checks_agree_on_the_not_requested_words():
    from preflight.hostside.ship import probe as shipped
    from preflight.model.facts import PADDLE_NOT_REQUESTED
    assert f'"{PADDLE_NOT_REQUESTED}"' in shipped()
