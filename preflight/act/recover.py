"""`preflight watch --act`: what the watch does, only when asked, about the host a finding
names. In order, each step said and logged: drain the host in Slurm with the finding as the
reason (where Slurm answers); stop the job (every process carrying its launch marker, on
every host of the launch); check the report's inventory again without the host (the check's
own command line, the host left out with --limit); and where that check says GO, launch its
plan with the same training script (`preflight launch`, which records the new job: the watch
follows it). The training script resumes from its own checkpoint; preflight restarts the
job, not its state.

Acting is capped (--act-max) and spaced (--act-cooldown). A finding that names no single host
to leave out (a hang nobody holds, a link between two hosts that could be either end's) is
said, never acted on: leaving out the wrong host stops a job for nothing."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from preflight.act import launches
from preflight.act.launch import STOP_EACH_S, load_plan, stop_on
from preflight.common.paddlelog import APPLICATION_ERROR
from preflight.common.remote import Remote, in_parallel
from preflight.common.statedir import state_dir
from preflight.config.errors import InputError
from preflight.model.findings import Finding, Status
from preflight.model.watch import ACT_AFTER_S, blame_of
from preflight.report import jsonreport

ACTED_ON = ("stopped", "dead", "hang", "straggler", "stalled")
# Options of check whose values are outputs or the host selection: the re-check sets its own.
OWN_VALUED = ("--json", "--junit", "--markdown", "--html", "--log", "--limit", "--emit-launch")
OWN_FLAGS = ("--no-progress", "--no-step-summary")
CHECK_TIMEOUT_S = 1800.0  # a re-check that runs longer is given up (the job stays stopped)
# How long the relaunch has to record its job: at once over SSH; a Slurm batch job once it
# runs, which may queue first. While its launch runs; said once it takes longer than SAY_S.
LAUNCH_RECORDED_S, SAY_S = 900.0, 10.0


def longest_phase(findings: Sequence[Finding]) -> float:
    """The longest phase of one host the findings say (the watch's "phase" lines carry how
    long each has run): an action waits at least as long, so that a phase taken for a
    straggler is over before anything is done. A phase of every host (a sharded checkpoint)
    names no one host that could be taken for one."""
    return max((float(f.data.get("phase_s") or 0.0) for f in findings
                if f.check == "phase" and len(f.hosts) == 1), default=0.0)


def _env() -> dict[str, str]:
    """This preflight's environment, where `-m preflight` never loads a source folder named
    preflight that lies in the directory it runs in."""
    return dict(os.environ, PYTHONSAFEPATH="1")


@dataclass(frozen=True)
class Culprit:
    host: str
    check: str  # the check that must pass on it again before `preflight resume` returns it
    why: str  # the finding's message


def culprits(findings: Sequence[Finding]) -> tuple[dict[str, Culprit], list[str]]:
    """Returns ({host: why to leave it out}, why others are not acted on) from the watch's
    findings: a failing stopped, dead, hang or straggler finding that names its hosts (the
    ranks it holds responsible, or the one host of a slow link)."""
    out: dict[str, Culprit] = {}
    notes: list[str] = []
    for f in findings:
        if f.status is not Status.FAIL or f.check not in ACTED_ON:
            continue
        blame = blame_of(f)
        if blame.cause == "none":
            continue  # it blames nobody (no finding of the watch's rules that name a cause)
        if blame.cause == "exit-unread":
            notes.append(f"{' and '.join(f.hosts)}: its rank ended first, but what it said is "
                         "not known (its output unread): its host or its own code: nothing "
                         "left out")
            continue
        if blame.cause == "hang" and not blame.ranks:
            notes.append("the hang names no rank that holds it: nothing to leave out")
            continue
        error = blame.error or ""
        if blame.cause == "exit" and APPLICATION_ERROR.match(error):
            notes.append(f"{' and '.join(f.hosts)}: its rank ended with an error of the job's "
                         f"own code ({error[:120]}): a fix of the script, not of the host: "
                         "nothing left out")
            continue
        if len(f.hosts) != 1 and not blame.ranks:
            notes.append(f"{' and '.join(f.hosts)}: " + (
                "the link between them could be either end's" if blame.cause == "link" else
                "their peers lost one of them, which is not told") + ": nothing left out")
            continue
        # What must pass on the host again before it returns: a link is measured again by
        # bandwidth, a rank short of CPU by cpu-cores, a slowed GPU by gpu-health, a rank
        # that stopped or died, or a host lost, by reaching it again.
        check = {"link": "bandwidth", "cpu": "cpu-cores", "pace": "cpu-cores",
                 "gpu": "gpu-health"}.get(blame.cause, "reachable")
        for host in f.hosts:
            out.setdefault(host, Culprit(host, check, f.message))
    return out, notes


def recheck_argv(argv: Sequence[str], leave_out: Sequence[str], report: str) -> list[str]:
    """The check's command line again, its outputs and --limit replaced: the same hosts
    without leave_out (and within its own --limit), the report to report, no live line."""
    out: list[str] = []
    limit: Optional[str] = None
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        name, eq, value = a.partition("=")
        if name in OWN_VALUED:
            if name == "--limit":
                limit = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            skip = not eq
            continue
        if a in OWN_FLAGS:
            continue
        out.append(a)
    parts = ([limit] if limit else []) + [f"!{h}" for h in leave_out]
    return out + ["--limit", ",".join(parts), "--json", report, *OWN_FLAGS]


def launch_argv(plan: str, launched: launches.Launched, accept_new_host_keys: bool
                ) -> list[str]:
    """`preflight launch` of the plan, as the job was launched before."""
    out = ["launch", "--plan", plan, "--transport", launched.transport]
    if launched.chdir:
        out += ["--chdir", launched.chdir]
    if launched.timeout:
        out += ["--timeout", f"{launched.timeout:g}"]
    if accept_new_host_keys:
        out.append("--accept-new-host-keys")
    return out + ["--", *launched.script]


@dataclass
class ActOptions:
    plan: str  # the report the job was launched from
    launched: launches.Launched
    max_acts: int = 1
    cooldown_s: float = 600.0
    accept_new_host_keys: bool = False
    check_timeout_s: float = CHECK_TIMEOUT_S
    # A host is acted on once the watch has named it without a break for this long
    # (--act-after), and for at least the longest phase the job has shown (a save, an
    # evaluation): a cause that outlasts the job's phases. A finding that comes and goes
    # is said, never acted on.
    act_after_s: float = ACT_AFTER_S


# (step, what was done, fields for the log)
Say = Callable[[str, str, Mapping[str, Any]], None]
# Drains the hosts ({host: reason}) where the scheduler can; returns what it did or why not,
# a line each (transport/slurm's, given by the command line: act does not load a transport).
Drain = Callable[[Mapping[str, str]], list[str]]


@dataclass
class Acted:
    """What a watch has done so far, over every job it followed: --act-max and
    --act-cooldown count each action, not each launch of the job."""

    count: int = 0
    last: Optional[float] = None  # time.monotonic() of the last action


@dataclass
class Actor:
    """Acts on the watch's findings (called once a judgement); returns the new launch when it
    launched the job again, which the watch then follows (with a new Actor sharing acted)."""

    opts: ActOptions
    remotes: Mapping[str, Remote]
    say: Say
    drain: Optional[Drain] = None
    acted: Acted = field(default_factory=Acted)
    said: set[str] = field(default_factory=set)
    stopped: bool = False  # this job was stopped here: its launch's failure is ours
    # host -> seconds named without a break, a phase of the job's own aside; those named at
    # the last judgement; when it was (clock()).
    named_s: dict[str, float] = field(default_factory=dict)
    named_last: frozenset[str] = frozenset()
    judged_at: Optional[float] = None
    longest_phase: float = 0.0  # seconds: the longest phase of the job the watch said
    # The clock the confirmation and the cooldown are counted on: a replay's is the log's.
    clock: Callable[[], float] = time.monotonic
    # A rehearsal (`watch --replay`, the corpus's score): the same decisions, each step said
    # as what would be done, nothing drained, stopped, checked or launched.
    rehearse: bool = False

    def __call__(self, findings: Sequence[Finding]) -> Optional[tuple[str, launches.Launched]]:
        targets, notes = culprits(findings)
        for note in notes:
            self._once("skip", f"not acting: {note}")
        now = self.clock()
        self.longest_phase = max(self.longest_phase, longest_phase(findings))
        wait = max(self.opts.act_after_s, self.longest_phase)
        self._count_named(targets, findings, now)
        young = [h for h in targets if self.named_s[h] < wait]
        if young:
            why = "--act-after" if wait == self.opts.act_after_s else \
                "the longest phase this job has shown"
            self._once("wait", f"not acting on {', '.join(young)} yet: acted on once it is "
                       f"named without a break for {wait:.0f} s ({why}; a phase of the job's "
                       "own pauses the count)")
            targets = {h: c for h, c in targets.items() if h not in young}
        if not targets:
            return None
        names = ", ".join(targets)
        if len(targets) > 1:
            self._once("skip", f"not acting on {names}: {len(targets)} hosts named at once "
                       "are no one host's cause; at most one node is left out at a time")
            return None
        done = self.acted
        if done.count >= self.opts.max_acts:
            self._once("skip", f"not acting on {names}: acted {done.count} time(s) already "
                       f"(--act-max {self.opts.max_acts})")
            return None
        if done.last is not None and now - done.last < self.opts.cooldown_s:
            self._once("skip", f"not acting on {names} yet: the last action was "
                       f"{now - done.last:.0f} s ago (--act-cooldown {self.opts.cooldown_s:g})")
            return None
        done.count += 1
        done.last = now
        self.said.clear()
        if self.rehearse:
            self._rehearse(targets)
            return None
        self._drain(targets)
        self._stop()
        report = self._recheck(list(targets))
        if report is None:
            return None
        return self._relaunch(report)

    def _count_named(self, targets: Mapping[str, Culprit], findings: Sequence[Finding],
                     now: float) -> None:
        """Adds the time since the last judgement to each host named at both. A host no
        longer named loses its count, but it is kept, paused, where the job is in a phase of
        its own (a save, an evaluation: every rank waits for one, the straggler too, which
        then looks like its peers) and for one judgement after one that named it (a phase
        ending, where the rules that name it hand over): a cause that outlasts the job's
        phases, counted outside them. Missed twice in a row with no phase, its count ends.
        A judgement that could not judge the host (its samples stale or late: a loaded host,
        a backed-up connection) is no judgement of it: its count is kept as it was, neither
        grown nor missed (stale data is neither a straggler nor a pass)."""
        dt = 0.0 if self.judged_at is None else now - self.judged_at
        self.judged_at = now
        phase = any(f.check == "phase" for f in findings)
        unjudged = {h for f in findings if f.status is Status.COULD_NOT_CHECK
                    for h in f.hosts} - set(targets)
        kept = {h: n for h, n in self.named_s.items() if h not in targets
                and (phase or h in self.named_last or h in unjudged)}
        for h in targets:
            kept[h] = self.named_s.get(h, 0.0) + (dt if h in self.named_last else 0.0)
        # A host skipped keeps its place: named at the judgement before, it is counted on
        # from the next that names it (the time it was not judged is not counted).
        self.named_s = kept
        self.named_last = frozenset(targets) | (unjudged & self.named_last)

    def _rehearse(self, targets: Mapping[str, Culprit]) -> None:
        """Says each step as --act would take it, with the fields the log keeps of it."""
        for host, c in targets.items():
            self.say("drain", f"would drain {host} (where Slurm answers for it): {c.check}: "
                     f"watch: {c.why}", {"host": host, "check": c.check, "rehearsed": True})
        hosts = list(self.opts.launched.hosts)
        self.say("stop", f"would stop the job on {', '.join(hosts)}",
                 {"hosts": hosts, "rehearsed": True})
        self.say("check", "would check again without " + ", ".join(targets) + ", and launch "
                 "the job on GO", {"leave_out": list(targets), "rehearsed": True})

    def _once(self, step: str, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            self.say(step, text, {})

    def _drain(self, targets: Mapping[str, Culprit]) -> None:
        if self.drain is None:
            self.say("drain", "not drained: no scheduler to drain in", {})
            return
        # The check to pass again first, then the finding: `preflight resume` returns the
        # host once that check passes on it.
        for line in self.drain({h: f"{c.check}: watch: {c.why}" for h, c in targets.items()}):
            self.say("drain", line, {})

    def _stop(self) -> None:
        self.stopped = True
        token = self.opts.launched.token
        hosts = [h for h in self.opts.launched.hosts if h in self.remotes]
        said: dict[str, str] = {}
        try:  # the plan's nodes: a job's containers are removed once its processes stop
            nodes = {n.host: n for n in load_plan(self.opts.plan, ignore_verdict=True)[0]}
        except InputError:
            nodes = {}

        def one(host: str) -> None:
            try:
                said[host] = stop_on(self.remotes[host], token, nodes.get(host)).said()
            except Exception as e:  # the host's own trouble: said, the others go on
                said[host] = f"could not stop: {type(e).__name__}: {e}"[:200]

        in_parallel([functools.partial(one, h) for h in hosts], STOP_EACH_S + 25.0, "stop")
        for h in hosts:
            self.say("stop", f"{h}: {said.get(h, 'could not stop: no answer')}",
                     {"host": h, "marker": token})

    def _recheck(self, leave_out: list[str]) -> Optional[str]:
        try:
            old = jsonreport.read(self.opts.plan)
        except InputError as e:
            self.say("check", f"not checked again: {e}", {})
            return None
        if not old.argv or old.argv[0] != "check":
            self.say("check", f"not checked again: {self.opts.plan} holds no check command "
                     "line (made by an older preflight): the job stays stopped", {})
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        d = state_dir("act")
        os.makedirs(d, exist_ok=True)
        report = os.path.join(d, f"{stamp}-{os.getpid()}-report.json")
        argv = recheck_argv(old.argv, leave_out, report)
        cwd = old.cwd if old.cwd and os.path.isdir(old.cwd) else None
        self.say("check", "checking again without " + ", ".join(leave_out) + ": preflight "
                 + " ".join(argv), {"argv": argv})
        try:
            p = subprocess.run([sys.executable, "-m", "preflight", *argv], cwd=cwd,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=self.opts.check_timeout_s, env=_env())
        except subprocess.TimeoutExpired:
            self.say("check", f"the check ran past {self.opts.check_timeout_s:g} s: given up; "
                     "the job stays stopped", {})
            return None
        try:
            new = jsonreport.read(report)
        except InputError:
            last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            self.say("check", f"the check wrote no report ({last}): the job stays stopped", {})
            return None
        verdict = new.verdict.value if new.verdict else "none"
        if p.returncode != 0:
            self.say("check", f"{verdict.upper()}: {'; '.join(new.reasons[:3])}: the job "
                     f"stays stopped (report {report})", {"report": report, "verdict": verdict})
            return None
        hosts = [n.host for n in new.plan.nodes] if new.plan else []
        self.say("check", f"GO on {', '.join(hosts)} (report {report})",
                 {"report": report, "verdict": verdict, "hosts": hosts})
        return report

    def _relaunch(self, report: str) -> Optional[tuple[str, launches.Launched]]:
        argv = launch_argv(report, self.opts.launched, self.opts.accept_new_host_keys)
        log = report[:-len("-report.json")] + "-launch.log"
        with open(log, "ab") as out:
            # Its own session: the job outlives the watch, as one launched by hand does.
            p = subprocess.Popen([sys.executable, "-m", "preflight", *argv],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True, env=_env())
        start = time.monotonic()
        said = False
        while time.monotonic() < start + LAUNCH_RECORDED_S:
            launched = launches.newest(report)
            if launched is not None:
                job = f", Slurm job {launched.jobid}" if launched.jobid else ""
                self.say("launch", f"launched again on {', '.join(launched.hosts)}: marker "
                         f"{launched.token}{job}, pid {p.pid}, its output in {log}",
                         {"marker": launched.token, "hosts": list(launched.hosts),
                          "pid": p.pid, "output": log, "jobid": launched.jobid})
                return report, launched
            if p.poll() is not None:
                break
            if not said and time.monotonic() > start + SAY_S:
                said = True
                self.say("launch", f"started (pid {p.pid}, its output in {log}); waiting for "
                         f"its job to run, up to {LAUNCH_RECORDED_S:g} s", {"output": log})
            time.sleep(0.2)
        if p.poll() is None:  # a Slurm job still queued: its launch goes on, unwatched
            self.say("launch", f"its job did not run within {LAUNCH_RECORDED_S:g} s (queued; "
                     f"its launch, pid {p.pid}, goes on; its output in {log}): not followed",
                     {"output": log})
        else:
            self.say("launch", f"the launch did not start (exit {p.poll()}; its output in "
                     f"{log}): the job stays stopped", {"output": log})
        return None
