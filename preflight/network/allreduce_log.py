"""What an all-reduce's hosts printed, read for its findings: their log lines (redacted,
Paddle's launcher's chatter and the stop's own signals left out), the line that says why a
rank failed, and how far a stopped launcher got."""

from __future__ import annotations

from typing import Optional

from preflight.common.paddlelog import (
    BANNER,
    LAUNCHER_LINE,
    STOP_REPORT,
    STOPPED_BY_SIGNAL,
    WHY,
    redact,
)
from preflight.common.ps_failure import OUT_OF_TIME
from preflight.common.remote import Done
from preflight.network.allreduce_cmd import HELD, HELD_EXIT
from preflight.network.paddle_job import LOG


def log_lines(done: Done, stopped: bool = False) -> list[str]:
    """The log lines a host command printed (redacted), Paddle's launcher chatter left out.
    stopped: the host's launcher was stopped by the run, so the shell's report of the
    signals it sent ("Terminated", "Killed") is the run's doing, not the host's."""
    lines = [redact(ln[len(LOG):].strip()) for ln in done.stdout.splitlines()
             if ln.startswith(LOG) and ln[len(LOG):].strip()]
    return [ln for ln in lines if not ln.startswith("LAUNCH INFO")
            and not (stopped and STOP_REPORT.search(ln))]


def log_reason(done: Done, stopped: bool = False) -> str:
    """Returns the line of a failing rank's log that says why, or its exit."""
    lines = log_lines(done, stopped)
    ended = stopped or done.exit == 124  # ended by a signal we sent: its report is noise
    why = [ln for ln in lines if WHY.search(ln) and not (ended and STOPPED_BY_SIGNAL.search(ln))]
    why = [ln for ln in why if not BANNER.search(ln)] or why
    text = (why or lines or [done.tail()])[-1][:300]
    if done.exit == 96:
        text = "could not create the run directory in /tmp"
    elif done.exit == 95:
        text = f"could not unpack the benchmark with the host's python: {done.tail()}"
    elif done.exit == 124:
        text = f"{OUT_OF_TIME}; log: {text}"
    elif done.exit == HELD_EXIT:
        text = held_reason(done) or text
    return text


def held_reason(done: Done) -> str:
    """Why the master's launcher was not started: its port already answered."""
    for ln in done.stdout.splitlines():
        if ln.startswith(HELD):
            port, _, who = ln[len(HELD):].strip().partition(" ")
            return (f"port {port}, the job's master, was taken before its launcher started "
                    f"({redact(who)[:300]}): Paddle's launcher takes whatever answers there "
                    "for its master, and every launcher waits for peers that never come")
    return ""


def log_of(done: Optional[Done]) -> str:
    """What a stopped host's log said last, as a suffix; where it holds nothing but Paddle's
    launcher's own lines, the last of those (how far the launcher got: the step it hung in);
    "" where it said nothing."""
    if done is None:
        return ""
    if log_lines(done, stopped=True):
        return f"; its log last said: {log_reason(done, stopped=True)}"
    said = launcher_last(done)
    return f"; its launcher last said: {said}" if said else ""


def launcher_last(done: Done) -> str:
    """The last line Paddle's launcher printed (redacted), its level and time dropped; ""
    where it printed none."""
    for ln in reversed(done.stdout.splitlines()):
        m = LAUNCHER_LINE.match(ln[len(LOG):].strip()) if ln.startswith(LOG) else None
        if m and m.group(1).strip("-= "):
            return redact(m.group(1))[:300]
    return ""
