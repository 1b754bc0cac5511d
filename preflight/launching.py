"""`preflight launch`: a report's plan on its hosts, through the transport that reaches them:
a launcher started on each host over the connections the transport opens (act/launch.py),
or, where the transport runs plans as one scheduler job, that job (the batch script of
placement/sbatch.py, submitted by the transport). Composes the transport with the stages, as
pipeline.py does for a check and watching.py for a watch."""

from __future__ import annotations

import secrets
import shlex
import sys
from collections.abc import Sequence
from typing import Optional, TextIO

from preflight.act import launches
from preflight.act.launch import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    MARKER,
    LaunchOptions,
    Source,
    run,
)
from preflight.common.visible import visible
from preflight.config.errors import UsageError
from preflight.inventory.query import HostQuery, hosts_of
from preflight.model.plan import Node
from preflight.placement import sbatch
from preflight.transport.base import BatchJob, Transport


def launch(transport: Transport, nodes: Sequence[Node], source: Source, query: HostQuery,
           opts: LaunchOptions, out: Optional[TextIO] = None,
           err: Optional[TextIO] = None) -> int:
    """Runs the plan's nodes; returns the exit code (0: every host's launcher, or the batch
    job, exited 0). The launchers' output goes to out under each host's name (stdout),
    preflight's own lines to err (stderr)."""
    out, err = out or sys.stdout, err or sys.stderr
    if transport.alone:
        raise UsageError(f"--plan {source.path}: the report names no inventory (a local "
                         "audit?); pass -i INVENTORY")
    if transport.batch:
        return as_batch_job(transport, nodes, source, opts, err)
    hosts = {h.name: h for h in hosts_of(query, transport.via, transport.alone)}
    missing = [n.host for n in nodes if n.host not in hosts]
    if missing:
        raise UsageError(f"--plan {source.path}: host {missing[0]} is not in "
                         f"{query.inventory}")
    failed = transport.reach([hosts[n.host] for n in nodes], opts.connect_timeout,
                             opts.accept_new_host_keys)
    if failed:
        for host, why in failed.items():
            print(f"preflight launch: {host}: {visible(why)}", file=err)
        print("preflight launch: nothing started", file=err)
        return EXIT_FAILED
    return run(nodes, transport.remotes(), opts, out=out, err=err)


def as_batch_job(transport: Transport, nodes: Sequence[Node], source: Source,
                 opts: LaunchOptions, err: TextIO) -> int:
    """The plan as one scheduler job, waited for. Its processes carry the launch marker, and
    the launch is recorded with the job's id once it runs, so `preflight watch --plan`
    follows it (and --act stops it by its marker and submits the plan that replaces it)."""
    token = secrets.token_hex(8)
    hosts = [n.host for n in nodes]
    plan = opts.plan
    scheduler = transport.via.value.capitalize()

    def running(job_id: str) -> None:
        assert plan is not None
        launches.record(token, plan, hosts, opts.script, opts.chdir, opts.timeout,
                        transport.via.value, job_id)
        print(f"preflight launch: {scheduler} job {job_id} runs, marker {MARKER}={token}"
              f" (preflight watch --plan {shlex.quote(plan)} --transport "
              f"{transport.via.value} follows it)", file=err, flush=True)

    done = transport.submit(BatchJob(
        sbatch.batch_script(nodes, source.mode), tuple(opts.script), f"preflight-{token}",
        {MARKER: token}, opts.chdir, opts.timeout, running if plan else None))
    if done.exit is None:
        print(f"preflight launch: {done.error}", file=err)
        return EXIT_TIMEOUT if done.timed_out else EXIT_FAILED
    print(f"preflight launch: {scheduler} job {done.job_id or '?'} on "
          f"{','.join(hosts)} ended with exit {done.exit} (output: {done.output})"
          + (f": {done.error}" if done.error else ""), file=err)
    return EXIT_OK if done.exit == 0 else EXIT_FAILED
