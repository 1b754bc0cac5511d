"""How the watch reads a Slurm job's state from squeue: what squeue prints for a job it lists,
for one it no longer lists, and when it cannot be asked (a squeue on PATH that answers as
Slurm 22.05's does; the real one is asked in tests/cluster/test_slurm.py)."""

from __future__ import annotations

import os
import stat

import pytest

from preflight.model.watch import SCHEDULER_GONE
from preflight.transport.slurm import steps


@pytest.fixture
def squeue(tmp_path, monkeypatch):
    """Writes a squeue that prints out, says err and exits rc; returns where its argv goes."""
    argv = tmp_path / "argv"

    def answer(out: str, err: str = "", rc: int = 0) -> str:
        script = tmp_path / "squeue"
        script.write_text(f"#!/bin/sh\necho \"$@\" > {argv}\nprintf '%s' '{out}'\n"
                          f"printf '%s' '{err}' >&2\nexit {rc}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return str(argv)

    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return answer


def test_a_listed_job_is_read_as_its_state_and_reason(squeue):
    argv = squeue("CANCELLED|None\n")
    assert steps.job_state("42") == ("CANCELLED", "")
    with open(argv) as fh:  # every state, ended ones too, for this one job
        assert fh.read().split() == ["-h", "-j", "42", "-t", "all", "-o", "%T|%r"]
    squeue("TIMEOUT|TimeLimit\n")
    assert steps.job_state("42") == ("TIMEOUT", "TimeLimit")


def test_a_job_slurm_no_longer_lists_has_ended(squeue):
    squeue("", "slurm_load_jobs error: Invalid job id specified", 1)
    state, why = steps.job_state("42")
    assert state == SCHEDULER_GONE and "no longer lists it" in why
    squeue("")  # listed by nobody, without an error
    assert steps.job_state("42")[0] == SCHEDULER_GONE


def test_a_squeue_that_fails_otherwise_is_an_error_not_an_end(squeue):
    squeue("", "slurm_load_jobs error: Unable to contact slurm controller", 1)
    with pytest.raises(steps.SlurmError, match="Unable to contact slurm controller"):
        steps.job_state("42")


def test_the_slurm_transport_says_the_end_of_the_job_it_follows_and_no_other(squeue):
    from preflight.model.watch import SchedulerEnd
    from preflight.transport.local.transport import LocalTransport
    from preflight.transport.slurm.transport import SlurmTransport
    from preflight.transport.ssh.transport import SshTransport
    t = SlurmTransport()
    squeue("CANCELLED|None\n")
    assert t.job_end() is None  # no job followed: nothing to say
    t.follow("42")
    assert t.job_end() == SchedulerEnd("42", "CANCELLED", "")
    squeue("RUNNING|None\n")
    assert t.job_end() is None
    squeue("", "slurm_load_jobs error: Unable to contact slurm controller", 1)
    assert t.job_end() is None  # Slurm not answering is no end
    t.job = steps.Allocation("43", own=True)  # the run's own allocation: its end is the run's
    squeue("CANCELLED|None\n")
    assert t.job_end() is None
    for other in (SshTransport(), LocalTransport()):  # no scheduler: never an end
        other.follow("42")
        assert other.job_end() is None
