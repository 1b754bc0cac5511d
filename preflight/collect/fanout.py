"""The probe every transport runs on every host (PROBE): its command line, what travels on
its stdin, and what its answer means (parsed facts, or why there are none). How it reaches a
host, bounded in concurrency and in time, is the transport's (common/hostjob.py's fan-out);
this module knows none of them."""

from __future__ import annotations

import functools
import shlex

from preflight.collect.container import probe_arg
from preflight.collect.parse import ProbeOutputError, parse_probe_output
from preflight.common.hostjob import Answer, CollectOptions
from preflight.hostside import ship
from preflight.model.host import Host, HostFailure, HostOutcome, Stage


@functools.lru_cache(maxsize=1)
def probe_payload() -> bytes:
    """What travels on the probe's stdin (hostside/ship.py packs it)."""
    return ship.stdin_payload(ship.probe())


def probe_args(host: Host, opts: CollectOptions, budget: float) -> list[str]:
    files = [a for path in opts.files for a in ("--file", path)]
    container = [] if host.container is None else probe_arg(host.container, host.name, budget)
    return ["--python", host.python, "--sample", f"{opts.cpu_sample_s:g}",
            "--budget", f"{budget:.0f}", *files, *([] if opts.paddle else ["--no-paddle"]),
            *container]


def probe_argv(host: Host, opts: CollectOptions, budget: float) -> list[str]:
    """The probe's command line: the host's python reading the probe from stdin
    (probe_payload), from memory: nothing is written on the host, so a full or read-only /tmp
    cannot stop a check. -S skips site (the probe needs only the standard library; it adds
    site-packages itself where there is a GPU driver for pynvml)."""
    return [host.probe_python, "-S", "-c", ship.STDIN_BOOTSTRAP,
            *probe_args(host, opts, budget)]


def remote_command(host: Host, opts: CollectOptions, budget: float) -> str:
    """Returns the one shell command run on a host; every inventory value is quoted.

    POSIX sh is named explicitly so a csh or fish login shell reads it the same way.
    `timeout` bounds the probe on the host even if our connection is gone; `exec` spares
    a fork per host."""
    return "sh -c " + shlex.quote(probe_script(host, opts, budget))


def probe_script(host: Host, opts: CollectOptions, budget: float) -> str:
    """The shell line that runs the probe from stdin, bounded by `timeout` on the host."""
    run = shlex.join(probe_argv(host, opts, budget))
    limit = int(budget) + 1
    return (f"command -v timeout >/dev/null 2>&1 && exec timeout -k 2 {limit} {run}; "
            f"exec {run}")


def read_answer(host: Host, answer: Answer) -> HostOutcome:
    """The host's facts from what its probe printed, or why they are none."""
    try:
        facts = parse_probe_output(answer.stdout, received_at=answer.received_at,
                                   sent_at=answer.sent_at)
    except ProbeOutputError as e:
        return HostOutcome(host, failure=HostFailure(Stage.PARSE, str(e)),
                           elapsed_s=answer.elapsed_s)
    return HostOutcome(host, facts=facts, elapsed_s=answer.elapsed_s,
                       received_at=answer.received_at, sent_at=answer.sent_at,
                       probe_output=answer.stdout)


class Probe:
    """The probe, as a transport runs it (common/hostjob.ProbeCall)."""

    def payload(self) -> bytes:
        return probe_payload()

    def argv(self, host: Host, opts: CollectOptions, budget: float) -> list[str]:
        return probe_argv(host, opts, budget)

    def script(self, host: Host, opts: CollectOptions, budget: float) -> str:
        return probe_script(host, opts, budget)

    def command(self, host: Host, opts: CollectOptions, budget: float) -> str:
        return remote_command(host, opts, budget)

    def read(self, host: Host, answer: Answer) -> HostOutcome:
        return read_answer(host, answer)


PROBE = Probe()
