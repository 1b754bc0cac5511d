"""The command line's parser: subcommands, their options and the types of their values (each
bad value is argparse's one-line error, exit 2)."""

from __future__ import annotations

import argparse
from typing import Any, Optional

from preflight import __version__
from preflight.checks import ALL_CHECKS
from preflight.cli.oneline import OneLineParser
from preflight.cli.values import duration, fraction, inventory, port, positive, regex, sizes
from preflight.inventory import FORMATS
from preflight.model.baseline import DEFAULT_MAX_AGE_S, DEFAULT_TOLERANCE
from preflight.model.container import RUNTIMES
from preflight.model.findings import FAIL_ON
from preflight.model.host import Via
from preflight.model.watch import ACT_AFTER_S, PHASE_MAX_S
from preflight.network.allreduce_cmd import DEFAULT_SIZES_MIB
from preflight.report.terminal import COLOR_CHOICES
from preflight.transport.slurm.health import DEFAULT_DEADLINE_S as DEFAULT_HEALTH_S

CHECK_NAMES = tuple(c.name for c in ALL_CHECKS)
# --connect-timeout where neither it nor the inventory's OpenSSH config gives one.
DEFAULT_CONNECT_TIMEOUT = 10.0


INVENTORY_HELP = ("the hosts: preflight YAML, an Ansible inventory (INI or YAML) or a "
                  "hostfile (told apart by content), or hosts named here: -i 'node[01-16]', "
                  "-i a,b,c")


def _inventory_options(c: argparse.ArgumentParser, help_text: str,
                       required: bool = False) -> None:
    """Where the hosts come from and how SSH reaches them (check, baseline, audit, launch)."""
    c.add_argument("-i", "--inventory", "--nodelist", required=required, type=inventory,
                   help=help_text + " (--nodelist: the same, as Slurm users say it)")
    c.add_argument("--inventory-format", choices=FORMATS, default="auto", metavar="FMT",
                   help="read -i as: " + ", ".join(FORMATS) + " (default auto: by content; "
                   "slurm: the hosts of $SLURM_JOB_NODELIST, or of -i as a Slurm nodelist)")
    c.add_argument("-F", "--ssh-config", metavar="FILE",
                   help="OpenSSH client config to read (default: the inventory's ssh_config, "
                   "else ~/.ssh/config and /etc/ssh/ssh_config; 'none': no config). Host "
                   "aliases, HostName, User, Port, IdentityFile, ProxyJump, ConnectTimeout, "
                   "UserKnownHostsFile and HostKeyAlias apply; the inventory's values win")


def _check_options(c: argparse.ArgumentParser, inventory_required: bool = False) -> None:
    """The options of a check run, shared by check, baseline and audit."""
    _inventory_options(c, INVENTORY_HELP + ("" if inventory_required else "; without it, "
                       "this machine is audited locally, without SSH"), inventory_required)
    c.add_argument("--transport", choices=[v.value for v in Via], default=Via.SSH.value,
                   help="how hosts are reached: ssh (default); slurm: job steps through "
                   "srun, in the current allocation ($SLURM_JOB_ID) or in one preflight asks "
                   "for (salloc --immediate) and gives back, the nodes -i's, else "
                   "$SLURM_JOB_NODELIST's; local: this machine alone, as with no -i")
    c.add_argument("--limit", metavar="PATTERN",
                   help="check only these hosts: names, groups, wildcards or ranges, "
                   "comma-separated; !PAT leaves out, &PAT intersects (as Ansible's --limit)")
    c.add_argument("--skip", action="append", default=[], metavar="CHECK",
                   choices=CHECK_NAMES, help="waive a check (repeatable): it does not run, "
                   "and every report says it was waived. Checks: " + ", ".join(CHECK_NAMES))
    c.add_argument("--forks", type=positive(int), default=32,
                   help="hosts probed at once (default: 32)")
    c.add_argument("--connect-timeout", type=positive(float), default=None, metavar="S",
                   help="TCP connect, SSH banner and auth timeout in seconds (default: the "
                   "OpenSSH config's ConnectTimeout, else 10)")
    c.add_argument("--deadline", type=positive(float), default=60.0, metavar="S",
                   help="per-host limit from connect to facts, in seconds (default: 60)")
    c.add_argument("--accept-new-host-keys", action="store_true",
                   help="record the keys of hosts not yet in known_hosts (like OpenSSH's "
                   "StrictHostKeyChecking=accept-new); changed keys are always refused")
    c.add_argument("--python", metavar="PY",
                   help="the hosts' training interpreter, e.g. /opt/conda/envs/train/bin/python "
                   "(default: python3): for the hosts whose inventory entry names none "
                   "(preflight: python; Ansible: preflight_python, which wins, then this, "
                   "then ansible_python_interpreter), and for this machine audited alone")
    c.add_argument("--cpu-sample", type=positive(float), default=None, metavar="S",
                   help="how long each host's CPU use is sampled where the job will run (its "
                   "cgroup, else its CPUs); it spans the probe's own work (default: 1, which "
                   "the Paddle import outlasts; 0.1 with --no-paddle)")
    c.add_argument("--no-paddle", action="store_true",
                   help="do not import Paddle on the hosts (about 1 s of CPU each): the "
                   "Paddle checks then say n/a, not requested, and block nothing")
    c.add_argument("--policy", metavar="FILE", help="YAML policy: mode, require, files, "
                   "ports, limits, container (flags below add to or override it)")
    k = c.add_argument_group("where the job runs (its container; every option of it in the "
                             "policy's or the inventory's container:)")
    k.add_argument("--container-image", metavar="IMAGE",
                   help="the job's image: Paddle is checked inside it, started as the job "
                   "would be, and the plan's commands run it")
    k.add_argument("--container-name", metavar="NAME",
                   help="a container already running on every host, instead of an image")
    k.add_argument("--container-runtime", choices=RUNTIMES,
                   help="the runtime that starts it (default docker)")
    c.add_argument("--mode", choices=("collective", "ps"),
                   help="job mode (default collective); ps requires the PS core")
    c.add_argument("--require", action="append", default=[], metavar="PIN",
                   help="version pin, e.g. 'paddle>=2.6,<3' or 'driver>=535' (repeatable; "
                   "names: paddle, driver, cuda, cudnn, nccl, python)")
    c.add_argument("--file", action="append", default=[], metavar="PATH", dest="files",
                   help="training script or config that must be identical on every host "
                   "(repeatable)")
    c.add_argument("--ports", metavar="LIST",
                   help="ports the plan may use, e.g. '6070-6077,6767'; they must be free "
                   "(default: the plan picks free ones from 6070 up and 6767 up)")
    j = c.add_argument_group("the job to place (a sized job is GO when it fits on the hosts "
                             "that passed; the others are left out with their reasons)")
    j.add_argument("--nproc-per-node", type=positive(int), metavar="N",
                   help="collective: ranks per worker host (default: its GPU count, 1 on CPU)")
    j.add_argument("--nnodes", type=positive(int), metavar="N",
                   help="collective: worker hosts (default: every host of the inventory)")
    j.add_argument("--server-num", type=positive(int), metavar="S",
                   help="ps: parameter servers in all (default 1)")
    j.add_argument("--trainer-num", type=positive(int), metavar="T",
                   help="ps: trainers in all (default: one per host)")
    j.add_argument("--emit-launch", metavar="DIR",
                   help="write <host>.sh and <host>.env for every host of the plan")
    n = c.add_argument_group("active tests (iperf3 between hosts, then an all-reduce)")
    n.add_argument("--no-network-tests", action="store_true",
                   help="skip iperf3 and the all-reduce (facts and static checks only)")
    n.add_argument("--network-matrix", action="store_true",
                   help="iperf3 between every pair of hosts (n-1 rounds each way) instead "
                   "of the ring (4 rounds, 6 for an odd count): for audits")
    n.add_argument("--iperf-seconds", type=positive(int), default=3, metavar="S",
                   help="length of each iperf3 run (default: 3)")
    n.add_argument("--iperf-warmup", type=positive(int, zero=True), default=1, metavar="S",
                   help="seconds each survey run measures first and leaves out (iperf3 -O): "
                   "TCP's slow start, whose retransmits are not the link's loss; 0 spends "
                   "none and judges no loss (default: 1)")
    n.add_argument("--iperf-port", type=port, default=5201, metavar="PORT",
                   help="port of the iperf3 servers (default: 5201)")
    n.add_argument("--iperf-streams", type=positive(int), default=None, metavar="N",
                   help="parallel TCP streams per iperf3 run (default: 4 where both NICs "
                   "negotiated 25 Gb/s or more, which one stream cannot fill; else 1)")
    n.add_argument("--no-allreduce", action="store_true",
                   help="iperf3 only: no all-reduce, and for a PS job no PS round")
    n.add_argument("--allreduce-port", type=port, default=36000, metavar="PORT",
                   help="the launcher's master port; gloo uses PORT+1, the ranks PORT+2.. "
                   "(default: 36000)")
    n.add_argument("--allreduce-sizes", type=sizes, default=DEFAULT_SIZES_MIB, metavar="MIB",
                   help="all-reduce message sizes in MiB, e.g. '1,8,32' (the default; NCCL "
                   "runs add 256 when the budget allows)")
    n.add_argument("--allreduce-budget", type=positive(float), default=30.0, metavar="S",
                   help="time the collectives may take: sizes and iterations that the "
                   "slowest link among the ranks cannot carry within it are dropped, and the "
                   "report says so (default: 30)")
    n.add_argument("--allreduce-timeout", type=positive(float), default=600.0, metavar="S",
                   help="the most the all-reduce may take on each host, launch included "
                   "(default: 600); a launch that stops progressing, or collectives past "
                   "what the budget predicted, are cut sooner")
    n.add_argument("--ps-mode", metavar="MODE",
                   help="PS jobs: the mode the PS round trains in, as the job does: async or "
                   "geo (default: the policy's ps_mode, else async)")
    n.add_argument("--ps-seconds", type=positive(float), default=5.0, metavar="S",
                   help="PS jobs: how long each trainer of the PS round trains (default: 5)")
    n.add_argument("--ps-timeout", type=positive(float), default=180.0, metavar="S",
                   help="PS jobs: the most the PS round may take on each host, Paddle's "
                   "import and the servers' start included (default: 180)")
    c.add_argument("--log", metavar="FILE", help="results log (JSON lines, appended as hosts "
                   "answer; `preflight report FILE` judges it even if the run was killed). "
                   "Default: a new file in $XDG_STATE_HOME/preflight/runs (~/.local/state), "
                   "the last 20 kept")
    c.add_argument("--no-log", action="store_true", help="write no results log")
    c.add_argument("--no-progress", action="store_true", help="no live progress line")
    _view_options(c)
    c.add_argument("-v", "--verbose", action="store_true",
                   help="every finding in full after the grouped summary, every host of "
                   "the plan, and debug logging on stderr")


def _view_options(c: argparse.ArgumentParser) -> None:
    """How the terminal view looks: shared by the commands that print one."""
    c.add_argument("-q", "--quiet", action="store_true",
                   help="print only the verdict line (the exit code says the rest)")
    c.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                   help="colour the output: auto (a terminal, unless NO_COLOR is set or "
                   "TERM=dumb), always or never")


def _report_options(c: argparse.ArgumentParser, fail_on_default: Optional[str] = "fail",
                    ) -> None:
    """Report files and the exit-code rule, shared by check, audit and report."""
    r = c.add_argument_group("reports (each written atomically; see docs/ci.md)")
    r.add_argument("--json", metavar="FILE", help="the JSON report (preflight launch, "
                   "diff and report read it)")
    r.add_argument("--junit", metavar="FILE", help="JUnit XML: a test case per check, its "
                   "hosts named as compressed hostlists")
    r.add_argument("--markdown", metavar="FILE", help="Markdown summary (also appended to "
                   "$GITHUB_STEP_SUMMARY when that is set)")
    r.add_argument("--html", metavar="FILE", help="self-contained HTML report with the "
                   "bandwidth heatmap and the all-reduce chart")
    r.add_argument("--no-step-summary", action="store_true",
                   help="do not append to $GITHUB_STEP_SUMMARY")
    r.add_argument("--fail-on", choices=FAIL_ON, default=fail_on_default,
                   help="what makes NO-GO and exit 1: 'fail' (failures, hosts that could "
                   "not be checked, check errors) or 'warn' (warnings too); default: "
                   + (fail_on_default or "the report's own"))


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="preflight", description=(
        "Pre-flight readiness check for PaddlePaddle distributed training clusters. "
        "Exit codes: 0 GO, 1 NO-GO (diff: differences that matter), 2 bad invocation or input, "
        "3 internal error, 130 interrupted."))
    p.add_argument("--version", action="version", version=f"preflight {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check the hosts of an inventory (or this machine)")
    _check_options(c)
    _report_options(c)
    b = sub.add_parser("baseline", help="record a known-good cluster's facts and "
                       "measurements: preflight baseline -i inventory.yaml -o baseline.json")
    b.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the baseline file to write (a JSON report with a baseline section)")
    b.add_argument("--force", action="store_true",
                   help="record it even when the cluster is NO-GO")
    _check_options(b, inventory_required=True)
    a = sub.add_parser("audit", help="compare new nodes with a baseline: preflight audit "
                       "-i new-nodes.yaml --baseline baseline.json")
    a.add_argument("--baseline", required=True, metavar="FILE",
                   help="made by preflight baseline")
    a.add_argument("--tolerance", type=fraction, default=DEFAULT_TOLERANCE, metavar="F",
                   help="bandwidth and all-reduce may be this much below the baseline's "
                   "(default: 0.2, i.e. 20%%)")
    a.add_argument("--max-age", type=duration, default=DEFAULT_MAX_AGE_S, metavar="AGE",
                   help="flag baseline measurements older than this (default: 24h)")
    _check_options(a, inventory_required=True)
    _report_options(a)
    df = sub.add_parser("diff", help="what changed between two reports or baselines")
    df.add_argument("first", metavar="A.json")
    df.add_argument("second", metavar="B.json")
    df.add_argument("--tolerance", type=fraction, default=DEFAULT_TOLERANCE, metavar="F",
                    help="bandwidth changes smaller than this are not listed (default: 0.2)")
    df.add_argument("--ignore", action="append", default=[], metavar="PATTERN",
                    help="also leave out the facts whose path matches this shell pattern, "
                    "e.g. 'gpu.devices[*].vbios' (repeatable; readings that change every run, "
                    "such as load and free space, are always left out)")
    df.add_argument("--json", metavar="FILE", help="the changes as JSON ('-': standard output)")
    df.add_argument("-q", "--quiet", action="store_true",
                    help="print only the count (the exit code says the rest)")
    rp = sub.add_parser("report", help="render a saved JSON report again: preflight report "
                        "r.json --html r.html --junit r.xml --markdown r.md")
    rp.add_argument("report", metavar="REPORT.json", help="a JSON report, or a results log "
                    "(--log), also of a run that was killed, or a watch's log (its course; "
                    "--html: its ranks over time)")
    _report_options(rp, fail_on_default=None)
    _view_options(rp)
    rp.add_argument("-v", "--verbose", action="store_true",
                    help="every finding in full after the grouped summary")
    for name, text in (("drain", "drain in Slurm the nodes a report failed, the finding as the "
                                 "reason: preflight drain r.json [--apply]"),
                       ("resume", "resume in Slurm the nodes a report passes that preflight "
                                  "drained: preflight resume r.json [--apply]")):
        dr = sub.add_parser(name, help=text)
        dr.add_argument("report", metavar="REPORT.json")
        dr.add_argument("--apply", action="store_true",
                        help="run the scontrol commands (default: print them)")
    he = sub.add_parser("health", help="this node alone, in seconds, for Slurm's "
                        "HealthCheckProgram or a prolog: one line, exit 0 healthy, 1 not")
    he.add_argument("--policy", metavar="FILE", help="policy YAML (limits, pins, ports)")
    he.add_argument("--python", default="python3", metavar="PY",
                    help="the training interpreter (with --paddle)")
    he.add_argument("--paddle", action="store_true",
                    help="import Paddle too (about a second more)")
    he.add_argument("--deadline", type=positive(float), default=DEFAULT_HEALTH_S, metavar="S",
                    help=f"the most the check may take (default {DEFAULT_HEALTH_S:g} s)")
    he.add_argument("--drain", action="store_true",
                    help="drain this node in Slurm when it fails (the line as the reason); "
                    "resume it when it passes and preflight had drained it")
    he.add_argument("--node", metavar="NAME", help="this node's Slurm name (default: "
                    "$SLURMD_NODENAME, else the hostname)")
    la = sub.add_parser("launch", help="run the plan of a report on its hosts over SSH: "
                        "preflight launch --plan report.json -- train.py ARGS")
    la.add_argument("--plan", required=True, metavar="REPORT",
                    help="JSON report of preflight check (its plan is run)")
    _inventory_options(la, "inventory for the SSH settings (default: the one the report "
                       "was made from, read as it was)")
    la.add_argument("--chdir", metavar="DIR", help="directory on every host to launch from "
                    "(default: the login directory)")
    la.add_argument("--timeout", type=positive(float), metavar="S",
                    help="stop the job on every host after S seconds (default: no limit)")
    la.add_argument("--connect-timeout", type=positive(float), default=None, metavar="S")
    la.add_argument("--accept-new-host-keys", action="store_true")
    la.add_argument("--transport", choices=[v.value for v in Via],
                    default=Via.SSH.value,
                    help="ssh (default): the launchers over SSH; slurm: the plan as one batch "
                    "job (sbatch --wait), srun starting each node's launcher")
    la.add_argument("--ignore-verdict", action="store_true",
                    help="launch the plan of a NO-GO report")
    la.add_argument("script", nargs=argparse.REMAINDER,
                    help="-- then the training script and its arguments")
    _watch_parser(sub)
    d = sub.add_parser("demo", help="build a simulated cluster on this machine (root), check "
                       "it healthy and with faults, remove it")
    d.add_argument("--hosts", type=positive(int), default=5, help="simulated hosts (default 5)")
    d.add_argument("--reports", default="preflight-demo", metavar="DIR",
                   help="where each check's JSON, HTML, JUnit and Markdown reports go "
                   "(default: ./preflight-demo)")
    return p


def _watch_parser(sub: Any) -> None:
    w = sub.add_parser("watch", help="follow a running Paddle job on its hosts and name the "
                       "rank, host and role that holds the others back, or the hang: "
                       "preflight watch --plan report.json")
    w.add_argument("--plan", metavar="REPORT",
                   help="the report whose plan the job runs: its hosts, the facts at the "
                   "check, and the marker of its newest preflight launch")
    _inventory_options(w, INVENTORY_HELP + "; every Paddle job on these hosts is watched")
    w.add_argument("--marker", metavar="TOKEN",
                   help="follow only the job preflight launch started with this marker "
                   "(default with --plan: its newest launch)")
    w.add_argument("--any-job", action="store_true",
                   help="with --plan: every Paddle job on the plan's hosts, not only the "
                   "one preflight launch started")
    w.add_argument("--transport", choices=[Via.SSH.value, Via.SLURM.value],
                   default=Via.SSH.value,
                   help="ssh (default); slurm: the sampler as a step of the job (srun "
                   "--overlap --jobid)")
    w.add_argument("--jobid", metavar="ID", help="with --transport slurm: the job to watch "
                   "(default: the Slurm job --plan's launch runs as, else $SLURM_JOB_ID)")
    w.add_argument("--interval", type=positive(float), default=5.0, metavar="S",
                   help="seconds between samples (default 5)")
    w.add_argument("--margin", type=fraction, default=0.25,
                   help="how much slower than its peers' median a rank may step before it "
                   "is named (default 0.25: below 0.75 x; above 0)")
    w.add_argument("--persist", type=duration, default=15.0, metavar="DURATION",
                   help="how long a rank must stay slower before it is named (default 15s; "
                   "at least 2 x --interval)")
    w.add_argument("--hang-after", type=duration, default=60.0, metavar="DURATION",
                   help="no progress on any rank for this long (and 5 x the longest quiet "
                   "spell before) is a hang (default 60s)")
    w.add_argument("--phase-max", type=duration, default=PHASE_MAX_S, metavar="DURATION",
                   help="a phase of the job's own (a rank saving or evaluating while its "
                   "peers wait, every rank saving) running longer than this is a warning "
                   "(default 10m); never acted on")
    w.add_argument("--phase-pattern", metavar="REGEX", type=regex,
                   help="what the log line of a phase looks like, quoted when a rank is in "
                   "one (default: checkpoint, save, eval, validation, test or infer)")
    w.add_argument("--step-pattern", metavar="REGEX", type=regex,
                   help="what a step line of the ranks' logs looks like (default: step, "
                   "iter or batch followed by a number)")
    w.add_argument("--once", action="store_true",
                   help="one judgement as soon as the window is covered, then exit (0 "
                   "healthy, 1 a finding): for cron and CI")
    w.add_argument("--for", dest="duration", type=duration, metavar="DURATION",
                   help="stop watching after this long (default: until Ctrl-C)")
    w.add_argument("--log", metavar="FILE", help="the results log, JSON lines of every "
                   "sample and finding (default: ~/.local/state/preflight/watch/)")
    w.add_argument("--log-max-mb", type=positive(float, zero=True), default=1024.0,
                   metavar="MB", help="the samples the results log keeps, at most: every "
                   "finding is kept, and every sample until half of this, then fewer and fewer "
                   "(default 1024; 0: no bound)")
    w.add_argument("--metrics-port", type=port, metavar="PORT",
                   help="serve the ranks' and hosts' figures and the findings as OpenMetrics "
                   "on this port (/metrics), for Prometheus")
    w.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDR",
                   help="the address --metrics-port listens on (default 127.0.0.1; 0.0.0.0 "
                   "for a Prometheus elsewhere)")
    w.add_argument("--metrics-textfile", metavar="FILE",
                   help="write the same figures to FILE after each judgement (node-exporter's "
                   "textfile collector: FILE ending in .prom in its directory)")
    w.add_argument("--connect-timeout", type=positive(float), default=None, metavar="S")
    w.add_argument("--accept-new-host-keys", action="store_true")
    w.add_argument("--replay", nargs="+", metavar="LOG",
                   help="judge watch logs (--log, also .gz) again by this version's rules: "
                   "what the watch would have said and what --act would have done, nothing "
                   "run; exit as --once on the last judgement")
    a = w.add_argument_group("acting (only with --act; the default only watches)")
    a.add_argument("--act", action="store_true",
                   help="with --plan: on a rank stopped, dead or holding the job, drain its "
                   "host in Slurm, stop the job, check the report's hosts again without it "
                   "and, on GO, launch the job again with the same script (which resumes "
                   "from its own checkpoint); each step said and logged")
    a.add_argument("--act-max", type=positive(int), default=1, metavar="N",
                   help="act at most N times in one watch (default 1)")
    a.add_argument("--act-cooldown", type=duration, default=600.0, metavar="DURATION",
                   help="the least time between two actions (default 10m)")
    a.add_argument("--act-after", type=duration, default=ACT_AFTER_S, metavar="DURATION",
                   help="act on a host once the watch has named it without a break for this "
                   "long (a phase of the job's own pauses the count), and at least as long as "
                   "the longest phase (save, evaluation) the job has shown (default 2m)")

