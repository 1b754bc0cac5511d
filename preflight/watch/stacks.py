"""The Python stacks of a hung job's ranks, from outside: py-spy (PyPI's, a binary) on each
host, where the host or the rank's own environment has it, reading each rank's memory
without pausing it (--nonblocking). What is kept of a rank is its main thread's innermost
frame, which the judgement groups ("2 ranks in all_reduce at ...; 1 in read at ...")."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

SPY_TIMEOUT_S = 10
MARK = "@@preflight-stack "
# py-spy dump: 'Thread 0x7F.. (idle): "MainThread"' (with --nonblocking: 'Thread 4242
# (idle)', the main thread first) then frames, innermost first, as
# '    all_reduce (paddle/distributed/communication/all_reduce.py:85)'.
_THREAD = re.compile(r'^Thread (?P<id>\S+) \((?:active|idle)[^)]*\)(?:: "(?P<name>[^"]*)")?')
_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<where>[^()]*)\)\s*$")


def command(pids: Sequence[int]) -> str:
    """One shell command for a host: each pid's py-spy dump after a line naming it. py-spy
    is looked for on PATH, then beside the rank's interpreter as it was started (a virtual
    environment's bin/, whose python links to the system's) and as it runs, each also
    inside the rank's container."""
    lines = []
    for pid in pids:
        p = int(pid)
        lines.append(
            f"spy=$(command -v py-spy || true); "
            f"a0=$(tr '\\0' '\\n' < /proc/{p}/cmdline 2>/dev/null | head -n 1); "
            f"exe=$(readlink /proc/{p}/exe 2>/dev/null); "
            f'for d in "${{a0%/*}}" "${{exe%/*}}"; do for c in "$d/py-spy" '
            f'"/proc/{p}/root$d/py-spy"; do [ -z "$spy" ] && case "$c" in /*) '
            f'[ -x "$c" ] && spy="$c";; esac; done; done; '
            f"echo '{MARK}{p}'; "
            f'if [ -n "$spy" ]; then timeout {SPY_TIMEOUT_S} "$spy" dump --nonblocking '
            f"--pid {p} 2>&1 | head -n 80; else echo 'py-spy: not found'; fi")
    return "sh -c " + shlex.quote("; ".join(lines))


def parse(output: str) -> dict[int, str]:
    """{pid: its main thread's innermost frame ("func (file:line)"), or why there is none}."""
    out: dict[int, str] = {}
    for part in output.split(MARK)[1:]:
        head, _, body = part.partition("\n")
        if not head.strip().isdigit():
            continue
        out[int(head.strip())] = innermost(body)
    return out


def innermost(dump: str) -> str:
    """The main thread's innermost frame of one py-spy dump (the first thread's when none is
    called MainThread), or py-spy's own words when it printed no stack."""
    frames: dict[str, str] = {}
    thread = None
    for line in dump.splitlines():
        t = _THREAD.match(line)
        if t:
            thread = t.group("name") or t.group("id")
            continue
        f = _FRAME.match(line)
        if f and thread is not None and thread not in frames:
            frames[thread] = f"{f.group('func')} ({_short(f.group('where'))})"
    if "MainThread" in frames:
        return frames["MainThread"]
    if frames:
        return next(iter(frames.values()))
    said = [ln.strip() for ln in dump.splitlines() if ln.strip()]
    return "no stack: " + (said[-1][:160] if said else "py-spy printed nothing")


def _short(where: str) -> str:
    """'/opt/env/lib/python3.11/site-packages/paddle/x/y.py:85' -> 'paddle/x/y.py:85'."""
    m = re.search(r"(?:site|dist)-packages/(.*)$", where)
    return m.group(1) if m else where
