"""The CLI as a whole process: exit codes, one-line errors, the local audit and its report."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def preflight(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONSAFEPATH="1")
    return subprocess.run([sys.executable, "-m", "preflight", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


# A local audit that fails at once: a training interpreter that does not exist. (--no-paddle
# would not: the Paddle checks are then "not requested", and the machine may well pass.)
NO_PADDLE = ("--python", "/nonexistent/bin/python", "--cpu-sample", "0.1")
REPORT = {"report_version": 1, "verdict": "go", "reasons": [], "hosts": {}, "findings": []}
BAD_INVOCATIONS = [
    ("missing-inventory", ["check", "-i", "nope.yaml"], "nope.yaml: no such file"),
    ("bad-inventory", ["check", "-i", "bad.yaml"], "host 'a': field 'port'"),
    ("zero-forks", ["check", "--forks", "0"], "must be greater than 0"),
    ("no-command", [], "required"),
    ("json-dir-missing", ["check", "-i", "good.yaml", "--json", "no/such/dir/r.json"],
     "does not exist"),
    ("bad-sizes", ["check", "--allreduce-sizes", "1,x"], "expected sizes in MiB"),
    ("huge-size", ["check", "--allreduce-sizes", "8192"], "sizes are MiB from above 0"),
    ("bad-port", ["check", "--iperf-port", "70000"], "must be a port from 1 to 65533"),
    ("ps-size-in-collective", ["check", "-i", "good.yaml", "--server-num", "2"],
     "field 'server_num': server_num does not apply to mode collective"),
    ("nnodes-in-ps", ["check", "-i", "good.yaml", "--mode", "ps", "--nnodes", "2"],
     "field 'nnodes'"),
    ("zero-nnodes", ["check", "--nnodes", "0"], "must be greater than 0"),
    ("emit-dir-parent-missing", ["check", "-i", "good.yaml", "--emit-launch", "no/such/out"],
     "--emit-launch no/such/out: directory"),
    ("launch-no-script", ["launch", "--plan", "r.json"], "give the training script after --"),
    ("launch-no-report", ["launch", "--plan", "r.json", "--", "train.py"],
     "r.json: no such file"),
    ("launch-no-go", ["launch", "--plan", "nogo.json", "--", "train.py"],
     "the report's verdict is 'no-go'"),
    ("launch-unknown-host", ["launch", "--plan", "go.json", "-i", "good.yaml", "--",
                             "train.py"], "host zz is not in good.yaml"),
    ("fail-on-choice", ["check", "--fail-on", "pass"], "invalid choice: 'pass'"),
    ("junit-dir-missing", ["check", "--junit", "no/dir/r.xml"], "--junit no/dir/r.xml"),
    ("audit-no-baseline-file", ["audit", "-i", "good.yaml", "--baseline", "b.json"],
     "b.json: no such file"),
    ("audit-report-not-baseline", ["audit", "-i", "good.yaml", "--baseline", "report.json"],
     "report.json: field 'baseline': not a baseline"),
    ("audit-bad-max-age", ["audit", "-i", "good.yaml", "--baseline", "report.json",
                           "--max-age", "soon"], "expected a duration like 24h"),
    ("audit-bad-tolerance", ["audit", "-i", "good.yaml", "--baseline", "report.json",
                             "--tolerance", "150%"], "must be from 0 to below 1"),
    ("baseline-needs-inventory", ["baseline", "-o", "b.json"], "-i/--inventory"),
    ("diff-not-json", ["diff", "good.yaml", "report.json"], "good.yaml:1: not a JSON report"),
    ("diff-not-report", ["diff", "plain.json", "report.json"],
     "plain.json: not a preflight report"),
    ("report-future-version", ["report", "future.json", "--html", "x.html"],
     "future.json: field 'report_version'"),
    # Each inventory format's bad input: one line naming the file (and line, host, field).
    ("ansible-ini-bad", ["check", "-i", "bad.ini"], "bad.ini:2: host 'n1': field "
     "'ansible_port'"),
    ("ansible-yaml-bad", ["check", "-i", "bad-ansible.yml"], "bad-ansible.yml:3: field "
     "'childs': unknown key in group 'all'"),
    ("hostfile-bad", ["check", "-i", "bad-hostfile"], "bad-hostfile:2: host 'n2': field "
     "'slots'"),
    ("host-list-bad", ["check", "-i", "n[1-"], "-i n[1-: bad host list"),
    ("slurm-not-inside", ["check", "--inventory-format", "slurm"],
     "$SLURM_JOB_NODELIST: not set"),
    ("unknown-format", ["check", "-i", "list.json"], "list.json: not an inventory preflight "
     "reads (accepted: preflight YAML"),
    ("ssh-config-missing", ["check", "-i", "good.yaml", "-F", "no_config"],
     "no_config: no such OpenSSH config file"),
    ("ssh-config-bad-value", ["check", "-i", "good.yaml", "-F", "bad_ssh_config"],
     "bad_ssh_config: host 'a': field 'Port'"),
    ("limit-matches-nothing", ["check", "-i", "good.yaml", "--limit", "b"],
     "--limit: 'b' matches no host or group"),
    ("skip-unknown-check", ["check", "--skip", "nope"], "invalid choice: 'nope'"),
    # Argument errors: one line, the closest name where one was misspelt, and where to look.
    ("skip-misspelt", ["check", "--skip", "bandwith"], "preflight check: error: argument "
     "--skip: invalid choice: 'bandwith' (did you mean 'bandwidth'?) (see preflight check "
     "--help)"),
    ("option-misspelt", ["check", "--no-netwrk-tests"], "preflight check: error: "
     "unrecognized arguments: --no-netwrk-tests (did you mean --no-network-tests?) (see "
     "preflight check --help)"),
    ("option-of-another-command", ["watch", "--iperf-seconds", "2"], "preflight watch: error: "
     "unrecognized arguments: --iperf-seconds 2 (see preflight watch --help)"),
    ("command-misspelt", ["chek"], "preflight: error: argument command: invalid choice: "
     "'chek' (did you mean 'check'?) (see preflight --help)"),
    # An empty -i (an unset $SLURM_JOB_NODELIST or CI variable) is not "this machine".
    ("empty-inventory", ["check", "-i", ""], "argument -i/--inventory/--nodelist: empty (an "
     "unset variable?)"),
    ("blank-nodelist", ["audit", "--baseline", "b.json", "--nodelist", " "],
     "argument -i/--inventory/--nodelist: empty"),
    ("launch-no-plan", ["launch", "--", "train.py"], "preflight launch: error: the following "
     "arguments are required: --plan (see preflight launch --help)"),
    # Outputs are checked before the run: nothing runs, then fails to write at the end.
    ("json-is-a-directory", ["check", "--json", "."], "--json .: is a directory"),
    ("two-reports-on-stdout", ["check", "--json", "-", "--junit", "-"],
     "--json and --junit: only one report can go to standard output"),
    ("emit-launch-is-a-file", ["check", "-i", "good.yaml", "--emit-launch", "good.yaml"],
     "--emit-launch good.yaml: not a directory"),
    # Told before any connection: a key the inventory names that is not there, a policy
    # that contradicts itself, a pin in plain words.
    ("identity-file-missing", ["check", "-i", "nokey.yaml"], "nokey.yaml:2: host 'a': field "
     "'identity_file': identity file "),
    ("policy-inverted", ["check", "--policy", "inverted.yaml"], "inverted.yaml:1: field "
     "'limits.shm_warn_mib': shm_warn_mib 10 is below shm_fail_mib 512"),
    ("pin-plain-words", ["check", "--require", "paddle=3"], "'=3' does not start with a "
     "comparison"),
]


@pytest.mark.parametrize("args,fragment", [c[1:] for c in BAD_INVOCATIONS],
                         ids=[c[0] for c in BAD_INVOCATIONS])
def test_bad_invocation_exits_2_with_one_line(tmp_path, args, fragment):
    (tmp_path / "bad.yaml").write_text("hosts:\n  a: {port: 0}\n")
    (tmp_path / "good.yaml").write_text("hosts:\n  a: {}\n")
    (tmp_path / "nokey.yaml").write_text("hosts:\n  a: {identity_file: keys/id_typo}\n")
    (tmp_path / "inverted.yaml").write_text("limits: {shm_warn_mib: 10}\n")
    node = {"host": "zz", "argv": ["python3", "-m", "paddle.distributed.launch"], "env": {}}
    for name, verdict in (("go.json", "go"), ("nogo.json", "no-go")):
        (tmp_path / name).write_text(json.dumps({"report_version": 1, "verdict": verdict,
                                                 "reasons": ["x"], "plan": {"nodes": [node]}}))
    (tmp_path / "report.json").write_text(json.dumps(REPORT))
    (tmp_path / "plain.json").write_text("{}")
    (tmp_path / "future.json").write_text(json.dumps(dict(REPORT, report_version=99)))
    (tmp_path / "bad.ini").write_text("[gpu]\nn1 ansible_port=0\n")
    (tmp_path / "bad-ansible.yml").write_text("all:\n  hosts: {n1: }\n  childs: {}\n")
    (tmp_path / "bad-hostfile").write_text("n1 slots=4\nn2 slots=0\n")
    (tmp_path / "list.json").write_text("[1, 2]\n")
    (tmp_path / "bad_ssh_config").write_text("Host a\n    Port twenty\n")
    p = preflight(*args, cwd=str(tmp_path))
    assert p.returncode == 2
    assert fragment in p.stderr
    assert "Traceback" not in p.stderr
    # One line, argparse's errors too (no usage block before the message).
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_local_audit_without_paddle_is_no_go_with_report(tmp_path):
    p = preflight("check", "--python", "/nonexistent/bin/python", "--json", "r.json",
                  "--cpu-sample", "0.1", cwd=str(tmp_path))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "NO-GO" in p.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "no-go"
    (host,) = doc["hosts"].values()
    assert host["status"] == "ok" and host["facts"]["cpu"]["logical"] >= 1
    fail = [f for f in doc["findings"] if f["status"] == "fail"]
    assert [f["check"] for f in fail] == ["paddle-stack"]
    assert "cannot run /nonexistent/bin/python" in fail[0]["message"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".preflight-report")]


def test_python_dash_m_and_entry_point_agree(tmp_path):
    p = preflight("--version", cwd=str(tmp_path))
    assert p.returncode == 0 and p.stdout.startswith("preflight ")


def test_local_audit_writes_every_report_and_the_step_summary(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env_args = ("check", "--python", "/nonexistent/bin/python", "--cpu-sample", "0.1",
                "--json", "r.json", "--junit", "r.xml", "--markdown", "r.md", "--html", "r.html")
    env = dict(os.environ, PYTHONSAFEPATH="1", GITHUB_STEP_SUMMARY=str(summary))
    p = subprocess.run([sys.executable, "-m", "preflight", *env_args], capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path), env=env)
    assert p.returncode == 1, p.stderr
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("## preflight: ❌ NO-GO")
    # GitHub's protocol: append, keeping what earlier steps wrote.
    assert summary.read_text() == "earlier step\n" + md
    assert "<testsuites" in (tmp_path / "r.xml").read_text()
    assert "class='banner nogo'" in (tmp_path / "r.html").read_text()
    # A saved report renders again later, the same way, and diff finds it equal to itself.
    again = preflight("report", "r.json", "--markdown", "again.md", "--no-step-summary",
                      cwd=str(tmp_path))
    # The full terminal view: this machine's facts, the findings, the verdict last; no plan
    # (one machine audited alone is no cluster to place a job on).
    assert again.returncode == 1 and again.stdout.startswith("THIS MACHINE ")
    assert "\nSTATUS  CHECK" in again.stdout and "PLAN" not in again.stdout
    assert again.stdout.splitlines()[-1].startswith("NO-GO: 1 failed: vm: Paddle not")
    assert "\nfail    paddle-stack     vm     Paddle not importable" in again.stdout
    assert (tmp_path / "again.md").read_text() == md
    same = preflight("diff", "r.json", "r.json", cwd=str(tmp_path))
    assert same.returncode == 0 and same.stdout == "no differences\n"
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["hosts"]["vm2"] = dict(next(iter(doc["hosts"].values())), address="10.9.9.9")
    (tmp_path / "r2.json").write_text(json.dumps(doc))
    changed = preflight("diff", "r.json", "r2.json", cwd=str(tmp_path))
    assert changed.returncode == 1
    assert changed.stdout.splitlines() == ["vm2: only in the second (10.9.9.9)", "1 differences"]
    # --json - : the changes as JSON on stdout, the text for people on stderr; same exit.
    as_json = preflight("diff", "r.json", "r2.json", "--json", "-", cwd=str(tmp_path))
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["changes"] == [
        {"kind": "host", "subject": "vm2", "host": "vm2", "text": as_json.stderr.split("\n")[0]}]
    assert preflight("diff", "r.json", "r.json", "-q", cwd=str(tmp_path)).returncode == 0


def test_report_under_a_stricter_fail_on_blocks_on_warnings(tmp_path):
    warn = {"check": "env", "status": "warn", "hosts": ["a"], "message": "a: NCCL_DEBUG=INFO",
            "data": {}}
    (tmp_path / "r.json").write_text(json.dumps(dict(REPORT, findings=[warn])))
    lenient = preflight("report", "r.json", "--junit", "l.xml", "--no-step-summary",
                        cwd=str(tmp_path))
    assert lenient.returncode == 0
    assert lenient.stdout.splitlines()[-1] == "GO: all 1 checks passed (1 warnings)"
    strict = preflight("report", "r.json", "--fail-on", "warn", "--junit", "s.xml",
                       "--no-step-summary", cwd=str(tmp_path))
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[-1] == \
        "NO-GO: 1 warnings (--fail-on warn): a: NCCL_DEBUG=INFO"
    assert 'type="warn"' in (tmp_path / "s.xml").read_text()
    assert 'type="warn"' not in (tmp_path / "l.xml").read_text()


def test_results_log_judges_again_as_the_run_did(tmp_path):
    state = tmp_path / "state"
    env = dict(os.environ, PYTHONSAFEPATH="1", XDG_STATE_HOME=str(state))
    args = ("check", "--python", "/nonexistent/bin/python", "--json", "r.json")
    p = subprocess.run([sys.executable, "-m", "preflight", *args], capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path), env=env)
    assert p.returncode == 1, p.stderr
    (log,) = (state / "preflight" / "runs").iterdir()  # the default place, one per run
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["start", "host", "end"]
    assert records[-1]["exit"] == 1 and records[-1]["verdict"] == "no-go"
    again = preflight("report", str(log), "--json", "again.json", "--no-step-summary",
                      cwd=str(tmp_path))
    assert again.returncode == 1 and again.stdout.splitlines()[-1].startswith("NO-GO: ")
    first = json.loads((tmp_path / "r.json").read_text())
    second = json.loads((tmp_path / "again.json").read_text())
    assert second["findings"] == first["findings"]
    assert second["hosts"] == first["hosts"] and second["plan"] == first["plan"]
    # An explicit --log replaces a finished run's log, as --json replaces its report.
    p = subprocess.run([sys.executable, "-m", "preflight", *args, "--log", "run.jsonl"],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path), env=env)
    p = subprocess.run([sys.executable, "-m", "preflight", *args, "--log", "run.jsonl"],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path), env=env)
    assert p.returncode == 1 and "stopped before it finished" not in p.stderr
    assert [json.loads(x)["kind"] for x in (tmp_path / "run.jsonl").read_text().splitlines()
            ] == ["start", "host", "end"]


def test_quiet_prints_the_verdict_line_and_color_follows_the_flag(tmp_path):
    quiet = preflight("check", *NO_PADDLE, "-q", "--no-log", cwd=str(tmp_path))
    assert quiet.returncode == 1
    lines = quiet.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("NO-GO: "), quiet.stdout
    assert "\033[" not in quiet.stdout  # a pipe: no colour by default
    always = preflight("check", *NO_PADDLE, "--color", "always", "--no-log",
                       cwd=str(tmp_path))
    assert "\033[31mNO-GO\033[0m" in always.stdout
    never = preflight("check", *NO_PADDLE, "--color", "never", "--no-log",
                      cwd=str(tmp_path))
    assert "\033[" not in never.stdout and "NO-GO" in never.stdout


def test_a_report_on_stdout_keeps_the_human_text_on_stderr(tmp_path):
    p = preflight("check", *NO_PADDLE, "--json", "-", "--no-log", cwd=str(tmp_path))
    assert p.returncode == 1
    doc = json.loads(p.stdout)  # stdout is the JSON document, whole
    assert doc["verdict"] == "no-go"
    assert "NO-GO" in p.stderr and not (tmp_path / "-").exists()


def test_a_symlinked_report_path_is_written_through(tmp_path):
    target = tmp_path / "reports" / "latest.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    p = preflight("check", *NO_PADDLE, "--json", str(link), "--no-log", cwd=str(tmp_path))
    assert p.returncode == 1
    assert link.is_symlink() and json.loads(target.read_text())["verdict"] == "no-go"


def test_the_local_audit_reads_as_a_check_of_this_machine(tmp_path):
    p = preflight("check", "--no-paddle", "--cpu-sample", "0.1", "--json", "r.json",
                  "--no-log", cwd=str(tmp_path))
    doc = json.loads((tmp_path / "r.json").read_text())
    lines = p.stdout.splitlines()
    # Its facts first: CPU, memory, GPUs, Paddle ("not requested"), network.
    assert lines[0].startswith("THIS MACHINE "), p.stdout
    assert [ln.split()[0] for ln in lines[1:6]] == ["CPU", "memory", "GPUs", "Paddle", "network"]
    assert lines[4] == "  Paddle   not requested (--no-paddle)"
    # --no-paddle: the Paddle checks are not requested, and block nothing.
    status = {f["check"]: f["status"] for f in doc["findings"]}
    assert status["paddle-stack"] == "skip"
    assert not [r for r in doc["reasons"] if "addle" in r], doc["reasons"]
    # A check that compares hosts has nothing to compare on one: n/a, not "pass".
    assert status["mtu"] == status["clock"] == "skip"
    assert "\nn/a     mtu " in p.stdout
    # No plan: one machine audited alone is not a cluster to place a job on.
    assert doc["plan"] is None and doc["local"] is True and "PLAN" not in p.stdout
    # Reached by the local transport: no SSH, so no SSH block.
    [me] = doc["hosts"].values()
    assert me["via"] == "local" and me["ssh"] is None
    assert p.returncode == (0 if doc["verdict"] == "go" else 1)


def test_the_local_audit_of_a_gpu_machine_whose_paddle_lacks_its_architecture_is_no_go(tmp_path):
    # This machine as an H100 host (the stand-in NVML) with the PyPI paddlepaddle-gpu 2.6.2
    # wheel for CUDA 11.8 (the stand-in Paddle): sm_61..86, no PTX, no cuda_archs() to ask.
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures")
    env = dict(os.environ, PYTHONSAFEPATH="1", FAKE_NVML="sw-cap", FAKE_PADDLE="2.6-cu118",
               PYTHONPATH=os.pathsep.join(os.path.abspath(os.path.join(fixtures, d))
                                          for d in ("fake_pynvml", "fake_paddle_gpu")))
    p = subprocess.run([sys.executable, "-m", "preflight", "check", "--python", sys.executable,
                        "--cpu-sample", "0.1", "--json", "r.json", "--no-log"],
                       capture_output=True, text=True, timeout=120, cwd=str(tmp_path), env=env)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert p.returncode == 1 and doc["verdict"] == "no-go", p.stdout
    fails = [f["message"] for f in doc["findings"]
             if f["check"] == "stack-compat" and f["status"] == "fail"]
    assert any("compute capability 9.0 is not among the architectures the Paddle 2.6.2 wheel "
               "for CUDA 11.8 carries (sm_61/sm_70/sm_75/sm_80/sm_86)" in m for m in fails), fails
    # The tiny op on each GPU says the same from Paddle itself, naming the GPU.
    assert any("GPU0: Paddle cannot compute on it" in m and "no kernel image" in m
               for m in fails), fails
    assert "\nNO-GO: 3 failed: " in p.stdout


def test_a_watch_that_cannot_start_leaves_no_log_behind(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    p = preflight("watch", "--plan", "bad.json", "--log", "logs/watch.jsonl",
                  cwd=str(tmp_path))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "bad.json" in p.stderr
    assert not (tmp_path / "logs" / "watch.jsonl").exists()
    # A log that was there before is the user's: kept as it was.
    (tmp_path / "logs").mkdir(exist_ok=True)
    (tmp_path / "logs" / "old.jsonl").write_text("{}\n")
    p = preflight("watch", "--plan", "bad.json", "--log", "logs/old.jsonl", cwd=str(tmp_path))
    assert p.returncode == 2 and (tmp_path / "logs" / "old.jsonl").read_text() == "{}\n"


def test_watch_once_says_how_long_it_waits_before_it_judges(tmp_path):
    # This machine's jobs (none, or other tests'): what is asserted is the first line.
    p = preflight("watch", "--once", "--persist", "1", "--interval", "0.2", "--log", "w.jsonl",
                  cwd=str(tmp_path))
    first = p.stderr.splitlines()[0]
    assert "one judgement in 2 s, once the 1 s window is covered" in first, p.stderr
    assert p.returncode in (0, 1), p.stderr


def without_slurm(tmp_path) -> dict[str, str]:
    """The environment of a machine with no Slurm client: PATH holds python alone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return dict(os.environ, PYTHONSAFEPATH="1", PATH=str(bin_dir))


def test_drain_and_resume_dry_runs_work_without_a_slurm_client(tmp_path):
    from support import REFUSED, cluster, paddle, report_doc

    from preflight.judge import judge, run_checks
    c = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={}, node04=REFUSED)
    (tmp_path / "r.json").write_text(json.dumps(report_doc(c, judge(c, run_checks(c)),
                                                           started_at=1.0)))
    env = without_slurm(tmp_path)
    run = [sys.executable, "-m", "preflight"]
    p = subprocess.run([*run, "drain", "r.json"], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    lines = sorted(p.stdout.splitlines())
    assert len(lines) == 2, lines  # the two failed nodes, each with its finding as reason
    assert lines[0].startswith("scontrol update nodename=node02 state=drain "
                               "'reason=preflight: paddle-stack: "), lines
    assert lines[1].startswith("scontrol update nodename=node04 state=drain "
                               "'reason=preflight: reachable: "), lines
    assert "Slurm was not asked (sinfo: not found" in p.stderr
    p = subprocess.run([*run, "resume", "r.json"], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "scontrol update nodename=node01 state=resume" in p.stdout
    assert "node02" not in p.stdout and "resumes only the nodes preflight drained" in p.stderr
    # --apply without Slurm is refused, in one line.
    p = subprocess.run([*run, "drain", "r.json", "--apply"], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env=env)
    assert p.returncode == 2 and p.stderr.strip() == \
        "preflight: error: drain: sinfo: not found (is this a Slurm login node?)", p.stderr


def test_health_drain_without_a_slurm_client_is_refused_before_any_verdict(tmp_path):
    p = subprocess.run([sys.executable, "-m", "preflight", "health", "--drain"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env=without_slurm(tmp_path))
    assert p.returncode == 2 and p.stdout == "", p.stdout
    assert p.stderr.strip() == ("preflight: error: health --drain: sinfo, scontrol not found: "
                                "--drain asks Slurm (run it on a Slurm node, or leave --drain "
                                "out)"), p.stderr
