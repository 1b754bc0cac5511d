"""A watch that follows a Slurm job hears the job's end from Slurm: its samplers (steps of
the job) end with it, and that silence is the job's end, not a host that could not be
checked; a job cancelled, timed out or preempted was stopped as a whole, blaming nobody."""

from __future__ import annotations

import io
import time
from dataclasses import replace
from typing import Any, Optional

import pytest
from watchtools import FakeHost, cluster, sigkilled, watched

from preflight.common.remote import Done
from preflight.model.findings import Finding, Status
from preflight.model.watch import SchedulerEnd, WatchPolicy, blame_of
from preflight.watch import run, scheduler

HOSTS = ["node01", "node02", "node03"]


def test_a_cancelled_job_is_stopped_as_a_whole_whatever_its_ranks_ends_looked_like():
    # scancel: Slurm TERMs and then KILLs the ranks, one before another; the judgement of
    # their ends (a rank dead first, its peers its victims) is not what happened.
    hosts = cluster(3)
    judged, _ = watched(hosts, 35, change=sigkilled(hosts))
    assert [f.check for f in judged if f.status is Status.FAIL] == ["dead"]
    said = scheduler.findings(SchedulerEnd("42", "CANCELLED"), judged, HOSTS)
    [f] = said
    assert (f.check, f.status, f.hosts) == ("ended", Status.WARN, tuple(HOSTS))
    assert blame_of(f).cause == "job-stopped" and blame_of(f).ranks == ()
    assert f.message == ("the Slurm job 42 on node[01-03] was cancelled (scancel: its user "
                         "or an administrator) (Slurm's state CANCELLED): the job was "
                         "stopped as a whole, no rank or host to blame")


@pytest.mark.parametrize("state", ["TIMEOUT", "PREEMPTED", "DEADLINE"])
def test_a_job_the_scheduler_ended_is_stopped_as_a_whole(state):
    [f] = scheduler.findings(SchedulerEnd("7", state, "TimeLimit"), [], HOSTS)
    assert blame_of(f).cause == "job-stopped" and f.status is Status.WARN
    assert f"Slurm's state {state}, TimeLimit" in f.message


def quiet(host: str) -> Finding:
    return Finding("watch", Status.COULD_NOT_CHECK, (host,), f"no sample from {host} for 9 s")


def test_while_slurm_ends_the_jobs_steps_only_that_is_said():
    [f] = scheduler.findings(SchedulerEnd("42", "COMPLETING"), [quiet("node02")], HOSTS)
    assert (f.check, f.status) == ("ended", Status.SKIP)
    assert "is ending (Slurm's state COMPLETING)" in f.message


def test_a_completed_job_keeps_the_judgement_of_its_end_without_the_samplers_silence():
    ended = Finding("ended", Status.PASS, tuple(HOSTS), "3 ranks of master x ended by 10:00")
    unreached = Finding("watch", Status.COULD_NOT_CHECK, ("node04",), "node04: could not be "
                        "reached: timed out")
    said = scheduler.findings(SchedulerEnd("42", "COMPLETED"), [quiet("node02"), ended],
                              HOSTS, [unreached])
    assert said == [unreached, ended]  # a host never reached is never watched: still said
    [f] = scheduler.findings(SchedulerEnd("42", "COMPLETED"), [quiet("node02")], HOSTS)
    assert (f.status, f.message) == (Status.PASS, "the Slurm job 42 on node[01-03] completed")


def test_a_failed_job_is_said_by_its_ranks_ends_and_by_slurm_only_where_they_say_nothing():
    hosts = cluster(3)
    judged, _ = watched(hosts, 35, change=sigkilled(hosts))
    said = scheduler.findings(SchedulerEnd("42", "FAILED", "NonZeroExitCode"), judged, HOSTS)
    assert [(f.check, f.status, f.hosts) for f in said if f.status is not Status.PASS] == \
        [("dead", Status.FAIL, ("node03",))]  # the cause, once; not Slurm's symptom too
    [f] = scheduler.findings(SchedulerEnd("42", "NODE_FAIL"), [quiet("node02")], HOSTS)
    assert f.status is Status.WARN and blame_of(f).cause == "none"
    assert f.message == ("the Slurm job 42 on node[01-03] ended NODE_FAIL; how its ranks "
                         "ended says no more")


class Sampler:
    """A sampler (a step of the job) that prints its host's samples, one a read, until the
    job is cancelled: then it ends as srun does when its step is killed."""

    def __init__(self, host: FakeHost, job: Job) -> None:
        self.host, self.job = host, job

    def take(self) -> bytes:
        if self.job.state != "RUNNING":
            return b""
        return (self.host.line(0.1) + "\n").encode()

    def wait(self, timeout: float) -> Done:
        return Done(None if self.job.state == "RUNNING" else 143, "",
                    "srun: error: node: task 0: Terminated")

    def close(self) -> None:
        pass


class Job:
    """The Slurm job: running, then cancelled at `at` (monotonic), COMPLETING for a while
    (its steps being killed), then CANCELLED."""

    def __init__(self, at: float, completing_s: float) -> None:
        self.at, self.completing_s = at, completing_s
        self.asked = 0

    @property
    def state(self) -> str:
        now = time.monotonic()
        if now < self.at:
            return "RUNNING"
        return "COMPLETING" if now < self.at + self.completing_s else "CANCELLED"

    def end(self) -> Optional[SchedulerEnd]:
        self.asked += 1
        state = self.state
        return None if state == "RUNNING" else SchedulerEnd("42", state)


class Node:
    def __init__(self, host: FakeHost, job: Job) -> None:
        self.name, self.host, self.job = host.name, host, job
        self.starts = 0

    def start(self, command: str) -> Sampler:
        self.starts += 1
        if self.job.state != "RUNNING":  # srun --jobid of an ended job
            raise RuntimeError("srun: error: Unable to create step for job 42: Job has "
                               "finished")
        return Sampler(self.host, self.job)

    def run(self, command: str, timeout: float) -> Done:
        return Done(0, "", "")


def test_a_watch_of_a_job_slurm_cancels_says_so_ends_with_it_and_blames_nobody():
    policy = replace(WatchPolicy(), interval_s=0.2, persist_s=0.4)
    job = Job(time.monotonic() + 1.0, completing_s=0.6)
    nodes: dict[str, Any] = {h.name: Node(h, job) for h in cluster(3)}
    opts = run.WatchOptions(policy=policy, duration_s=30.0, scheduler_end=job.end)
    out = io.StringIO()
    began = time.monotonic()
    result = run.watch(nodes, {}, opts, None, out)
    took = time.monotonic() - began
    assert took < 15.0, took  # it ended with the job, not at --for's 30 s
    [f] = result.findings
    assert (f.check, f.status) == ("ended", Status.WARN), f.message
    assert blame_of(f).cause == "job-stopped" and "was cancelled" in f.message
    assert result.code == run.EXIT_FINDINGS  # a stopped job is said, as a Ctrl-C's is
    # Nothing was said of its hosts' samplers ending with it, at any judgement.
    assert "could not" not in out.getvalue() and "sampler ended" not in out.getvalue()
    assert "is ending (Slurm's state COMPLETING)" in out.getvalue()
    # Nobody was blamed at any judgement on the way: each line the watch printed as it went
    # (a finding as it appeared or changed) fails nothing, and warns only of the job's end.
    said = [ln.split()[1:3] for ln in out.getvalue().splitlines()]
    assert said and all(st != "fail" and (st != "warn" or check == "ended")
                        for st, check in said), out.getvalue()
