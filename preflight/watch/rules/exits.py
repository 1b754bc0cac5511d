"""How a rank's end reads: its exit (when, on which clock, the last lines it said, an OOM
kill), the error line of its log's tail, and which exits caused the others (a rank that
failed first, its peers aborted for its loss) or were one stop of the whole job. Read by
rules/ends.py, which names them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from preflight.common.paddlelog import CRASHED, ERROR_LINE, LOST_PEER, TERMED
from preflight.model.watch import RankId, WatchPolicy


@dataclass(frozen=True)
class Exit:
    t: float  # on its host's clock
    rid: RankId
    tail: Sequence[str]
    oom: Optional[tuple[int, int]] = None  # its memory cgroup's OOM kills rose: before, after
    at: float = 0.0  # t on the controller's clock: what orders exits on different hosts
    # Where its output went, when the watch could not read it (a pipe, a terminal): what it
    # said as it ended is not known, so its silence is no evidence of a kill.
    unread: Optional[str] = None

    @property
    def error(self) -> Optional[str]:
        return error_line_of(self.tail)


def error_line_of(tail: Sequence[str]) -> Optional[str]:
    """The line of a log's tail that says what went wrong: its last error line where it has
    one ("RuntimeError: ...", Paddle's "FatalError: `Process abort signal` ..."), else its
    last line of a crash ("Segmentation fault", "terminate called ...")."""
    if not any(CRASHED.search(ln) for ln in tail):
        return None
    return next((ln.strip() for ln in reversed(tail) if ERROR_LINE.match(ln)),
                None) or next(ln for ln in reversed(tail) if CRASHED.search(ln))


# A stop of the whole job (a Ctrl-C, scancel) ends every rank so (paddlelog's TERMED) within
# this many intervals (each end is seen at its host's next sample), plus KILL_AFTER_TERM_S.
STOP_WINDOW_INTERVALS = 2
# A rank that does not end on a stop's TERM is KILLed this much later (`preflight launch`'s
# STOP_WAIT_S), and the TERM reaches each host when its own stop command runs (in parallel
# over SSH, seconds apart on a loaded controller): with a short interval, two intervals alone
# ended before such a rank did, and its peers, TERMed at once, were taken for dead.
KILL_AFTER_TERM_S = 5.0


def stop_window_s(policy: WatchPolicy) -> float:
    """How far apart the ends of the ranks of a job stopped as a whole may be seen."""
    return STOP_WINDOW_INTERVALS * policy.interval_s + KILL_AFTER_TERM_S
CAUSE_LAG_INTERVALS = 1.5  # how much later than its victims' ends a cause's end may be seen


# What `preflight launch` does once a host's launcher fails.
LAUNCH_STOPPED = "preflight launch stopped the job on every host"


def exit_causes(exits: Sequence[Exit], policy: WatchPolicy) -> tuple[list[Exit], list[Exit]]:
    """The ranks whose end ended their peers, and the peers' failures they caused. A rank's
    peers fail for its loss (gloo aborts, a connection closes, the launch stops them with a
    TERM), each with an error of its own that names the symptom: the cause is the rank that
    failed otherwise no later than a sample after the first of them. Its own error says why;
    a rank the OOM killer takes (SIGKILL) says nothing, where Paddle writes an error for
    every signal a rank can catch. Named once, on its host; ([], []) where nothing folds."""
    lost = [e for e in exits if e.error is not None and LOST_PEER.search(tail_text(e))]
    if not lost:
        return [], []
    # Its peers fail within seconds of it (gloo at once; the launch's TERM once the host's
    # launcher has noticed): an end a persistence window before theirs is not theirs. Seen
    # as late as a sample after theirs (its host's sampler samples on its own beat), and a
    # little more (the error of the clock offset: a sample's time in flight).
    start = lost[0].at - policy.persist_s
    window = lost[0].at + CAUSE_LAG_INTERVALS * policy.interval_s
    own = [e for e in exits if e.error is not None and e not in lost and start <= e.at <= window]
    # A rank that ended without a word is the cause, rather than one whose words are not
    # known (its output unread: gloo may have aborted it too).
    silent = [e for e in exits if e.error is None and start <= e.at <= window]
    causes = own or [e for e in silent if e.unread is None] or silent
    if not causes:
        return [], []
    since = causes[0].at - policy.interval_s
    # The ranks whose words are not known that ended with its victims: victims too, as far as
    # anything tells (the error said is a victim's whose words are known).
    unknown = [e for e in silent if e.unread is not None and e not in causes]
    return causes, [e for e in lost + unknown if e.at >= since]


def whole_stop(exits: Sequence[Exit], policy: WatchPolicy) -> bool:
    """Whether the job's ranks (all ended) were stopped together: every one by a signal to
    stop that it caught (TERM, INT) or silently (KILLed after), within a few intervals, at
    least one saying so, none with an error of its own or the OOM killer's."""
    if not exits or exits[-1].at - exits[0].at > stop_window_s(policy):
        return False
    termed = [bool(TERMED.search(tail_text(e))) for e in exits]
    return any(termed) and all(t or (e.error is None and e.oom is None)
                               for t, e in zip(termed, exits))


def tail_text(e: Exit) -> str:
    return "\n".join(e.tail)
