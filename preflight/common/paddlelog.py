"""What a Paddle job's logs say, read alike by the checks that start a job (the all-reduce, the
PS round) and by the watch that follows one. A line quoted from a log or a command line is
redacted first (common/secrets.py: the one vocabulary of what looks secret), so that no secret
it holds reaches a finding, whichever report or log then quotes it."""

from __future__ import annotations

import re

from preflight.common.secrets import hide


def redact(line: str) -> str:
    """The line with every secret in it hidden (common/secrets.py)."""
    return hide(line)


# The one table of what Paddle's logs say, read by the all-reduce and the PS round
# (network/allreduce_log.py, common/ps_failure.py) and by the watch (watch/judge.py).

# ---------------------------------------------------------------- a rank's own failure
# A Python exception as a traceback ends ("ValueError: ...", "...InvalidArgumentError: ...").
EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception): ")
# A line that names an error, at its start: the one a finding quotes of a rank's tail.
ERROR_LINE = re.compile(r"\s*[\w.]*(Error|Exception)\b")
# The last lines of a rank that crashed: a Python traceback or exception, Paddle's "Error"
# lines, the kernel's or the shell's words for a fatal signal.
CRASHED = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b|"
                     r"\bError\b|Killed|core dumped|Aborted|Segmentation fault|"
                     r"terminate called")
# An exception of the job's own code (a wrong shape, a missing key, a bad import): a fix of
# the script, never of the host it ran on. Errors that may be the host's (RuntimeError from
# NCCL or CUDA, OSError, MemoryError, Paddle's fatal signals) are not among them.
APPLICATION_ERROR = re.compile(
    r"^\s*(?:[\w]+\.)*(ValueError|KeyError|TypeError|IndexError|AttributeError|NameError|"
    r"AssertionError|ZeroDivisionError|ImportError|ModuleNotFoundError|SyntaxError|"
    r"NotImplementedError|UnboundLocalError|RecursionError|StopIteration)\b")
# Lines of a failing rank's log that may say why; the last one found is quoted.
WHY = re.compile(r"(Error|Exception|error:|refused|timed out|Timeout|Killed|Abort|"
                 r"No such|not found|cannot|failed)", re.IGNORECASE)

# ---------------------------------------------------------------- a peer lost
# A rank's end for the loss of a peer: the abort gloo raises, a connection closed, NCCL's
# remote error, or the TERM that stopped it (Paddle names each signal it caught).
# gloo's own words for a peer gone mid-collective (Paddle 2.6.2 and 3.3.1): "[...pair.cc:587]
# TIMEOUT self_rank = 0 pair_rank = 1 peer_str = [10.0.0.3]:27549", "Read error ...:
# Connection reset by peer".
LOST_PEER = re.compile(r"Process abort signal|Termination signal|Connection (closed|reset) by "
                       r"peer|IoException|remote process exited|Broken pipe|ECONNRESET|"
                       r"TIMEOUT self_rank = \d+ pair_rank = \d+", re.I)
# gloo's timeout names the peer it waited on (its address).
GLOO_PEER = re.compile(r"TIMEOUT\b.*peer_str = \[([^\]]+)\]")
# A collective that gave up waiting, with its timeout: gloo's EnforceNotMet in Paddle's
# process group ("... pair.cc:708] ex_ == nullptr. Timed out waiting 30000ms for recv
# operation to complete"; 30 s in Paddle 2.6.2 and 3.3.1).
COLLECTIVE_TIMEOUT = re.compile(r"Timed out waiting (\d+) ?ms for (?:recv|send)")

# ---------------------------------------------------------------- a signal's banner
# Paddle's own banner as a fatal signal ends a rank (FatalError, TimeInfo, SignalInfo): that
# it aborted, never why; the line before it that says why is quoted instead, where there is one.
BANNER = re.compile(r"\*\*\* Aborted at|\[SignalInfo:|^Error Message Summary:$|"
                    r"^FatalError: .* is detected by the operating system")
# What Paddle prints as a signal ends it: a stop's or the host's `timeout`'s doing, never why.
STOPPED_BY_SIGNAL = re.compile(r"Termination signal|\*\*\* Aborted at|\*\*\* SIGTERM|SIGKILL|"
                               r"^Error Message Summary:$")
# What a rank prints as a stop's signal that it caught ends it: Paddle names each signal it
# catches ("FatalError: `Termination signal` is detected", "*** SIGTERM"); Python's own
# KeyboardInterrupt for a Ctrl-C. The watch reads a whole job ended so as stopped, not failed.
TERMED = re.compile(r"Termination signal|Interrupt signal|\*\*\* SIG(?:TERM|INT)\b|"
                    r"^KeyboardInterrupt", re.M)
# How a shell reports a command that a stop's TERM or KILL ended: dash's bare word, bash's
# "sh: line 1: 1234 Terminated  timeout ...".
STOP_REPORT = re.compile(r"^(?:.*: line \d+: +\d+ +)?(?:Terminated|Killed)\b")

# ---------------------------------------------------------------- Paddle's launcher
# Its own lines: "LAUNCH INFO 2026-11-24 19:29:09,044 Waiting peer start...".
LAUNCHER_LINE = re.compile(r"^LAUNCH [A-Z]+ (?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )?(.*)$")
