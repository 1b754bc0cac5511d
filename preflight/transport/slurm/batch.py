"""One batch script run as a Slurm job, waited for (sbatch --wait): what `preflight launch`
asks a transport whose plan runs as one job. The script goes to Slurm from a temporary file
here; nothing needs sharing but the training script. The job's output is Slurm's
(slurm-JOBID.out in its directory)."""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
import threading
import time
from typing import Optional

from preflight.transport.base import BatchJob, Submitted
from preflight.transport.slurm import steps as slurm

SBATCH_GRACE_S = 120  # past --time, what sbatch --wait gets to report the job's end
JOB_POLL_MAX_S = 15.0  # squeue is asked at most this far apart while the job waits to run


def submit(job: BatchJob) -> Submitted:
    """Runs job.text as one Slurm job with job.args after it, and waits for its end; tells
    job.on_running its id once it runs (found by its unique name)."""
    with tempfile.NamedTemporaryFile("w", prefix="preflight-", suffix=".sbatch",
                                     delete=False) as fh:
        fh.write(job.text)
    exports = ",".join(f"{k}={v}" for k, v in job.env.items())
    argv = ["sbatch", "--wait", "--parsable", f"--job-name={job.name}",
            f"--export=ALL{',' + exports if exports else ''}"]
    if job.chdir:
        argv.append(f"--chdir={job.chdir}")
    if job.timeout:
        argv.append(f"--time={max(1, math.ceil(job.timeout / 60))}")
    limit = None if job.timeout is None else job.timeout + SBATCH_GRACE_S
    try:
        p = subprocess.Popen([*argv, fh.name, *job.args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        os.unlink(fh.name)
        return Submitted(None, "", "sbatch not found (is this a Slurm login node?)")
    try:
        if job.on_running is not None:
            _tell_running(p, job)
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return Submitted(None, "", "the job did not end within its time limit",
                         timed_out=True)
    finally:
        os.unlink(fh.name)
    job_id = out.strip().split(";")[0]
    said = err.strip().splitlines()[-1] if p.returncode and err.strip() else ""
    return Submitted(p.returncode, job_id, said,
                     output=f"slurm-{job_id}.out in {job.chdir or 'the submit directory'}")


def _tell_running(p: subprocess.Popen[str], job: BatchJob) -> threading.Thread:
    """Tells job.on_running the job's id once it runs, found by its unique name (sbatch
    --wait's own output is read when it ends; a watch's samplers are steps in the job, which
    a pending job cannot run). Asks squeue less often the longer it waits."""
    assert job.on_running is not None
    on_running = job.on_running

    def poll() -> None:
        pause = 1.0
        while p.poll() is None:
            try:
                running: Optional[str] = slurm.job_of_name(job.name, running=True)
            except slurm.SlurmError:
                running = None
            if running:
                on_running(running)
                return
            time.sleep(pause)
            pause = min(pause * 1.5, JOB_POLL_MAX_S)

    t = threading.Thread(target=poll, name="job-listed", daemon=True)
    t.start()
    return t
