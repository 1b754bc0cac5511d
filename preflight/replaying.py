"""`preflight watch --replay LOG...`: a watch's results log judged again by this version's
rules, printed as the watch would have printed it (each finding as it appears, changes and
clears, stamped with the time the watch received the samples it read), with what `--act`
would have done at each judgement, rehearsed: nothing is drained, stopped or launched. An
operator checks an upgrade against their own past jobs before leaving --act on. As watching.py
composes a watch with --act, this composes the replay (watch/replay.py) with act's rehearsal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Optional, TextIO

from preflight.act.rehearse import Acting, rehearsal
from preflight.model.findings import Status
from preflight.watch.replay import Judgement, records, replayed
from preflight.watch.view import Live, line

EXIT_HEALTHY, EXIT_FINDINGS = 0, 1  # as --once's


def replay_logs(paths: Sequence[str], acting: Acting, out: TextIO, width: int = 0) -> int:
    """Prints each log's judgements again; returns --once's exit code of the worst: 0 where
    every log's last judgement found the job running with no finding, 1 otherwise."""
    code = EXIT_HEALTHY
    for path in paths:
        code = max(code, _one(path, acting, out, width))
    return code


def _one(path: str, acting: Acting, out: TextIO, width: int) -> int:
    live = Live(out, width)
    last: Optional[Judgement] = None
    count = actions = 0
    for j in replayed(records(path), path, rehearsal(acting)):
        if last is None:
            out.write(f"replay of {path}, judged by this version's rules:\n")
        live.update(j.findings, j.at)
        for a in j.acts:
            out.write(f"{_clock(j.at)}  act      {a.step:<10} {a.text}\n")
            actions += a.step == "stop"
        count += 1
        last = j
    if last is None:
        out.write(f"replay of {path}: no judgement (the watch ended before its first "
                  "interval)\n")
        return EXIT_FINDINGS
    out.write(f"{path}: {count} judgements to {_clock(last.at)}; --act would have acted "
              f"{actions} time(s) (--act-max {acting.max_acts}, --act-cooldown "
              f"{acting.cooldown_s:g}s); at the last:\n")
    for f in last.findings:
        out.write(line(f, width, at=last.at) + "\n")
    held = not last.findings or any(f.status is not Status.PASS for f in last.findings)
    return EXIT_FINDINGS if held else EXIT_HEALTHY


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))
