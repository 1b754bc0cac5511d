"""`preflight watch`: follows a running Paddle job on its hosts and names the rank, host and
role that holds the others back, or the hang: a sampler on every host (hostside's sampler, started
by sampler_text) streams samples (samples), which are kept as series (series), judged (judge)
and shown, logged and exported (view, record, metrics) by the run (run); acting on a finding
only when asked (act).

This package's own namespace holds one thing more: the step hook a training script may call
once a step, `from preflight.watch import step`, which makes progress exact where the logs
are silent. It is defined here, with the standard library only, so that the import loads
nothing else of preflight but the hook's file contract (hostside/stephook.py), which the
sampler that reads the file is joined with."""

import atexit
import os
import stat
import time

from preflight.hostside import stephook


class _Hook:
    fd = -1
    pid = 0
    count = 0
    written = 0.0


_EVERY_S = 0.2  # at most five writes a second, whatever the step rate


def step(n: int = 1) -> None:
    """Counts n steps of this process for `preflight watch` (a file of a few bytes in
    /dev/shm, or the temp directory, named for the pid; removed at exit: stephook.py)."""
    _Hook.count += n
    now = time.time()
    if now - _Hook.written < _EVERY_S:
        return
    _Hook.written = now
    try:
        if _Hook.pid != os.getpid():  # first call, or a forked child: a file of its own
            _Hook.fd, _Hook.pid = _open(), os.getpid()
        os.pwrite(_Hook.fd, stephook.hook_line(_Hook.count, now), 0)
    except OSError:
        _Hook.written = now + 60.0  # a full or read-only disk: try again in a minute


def _open() -> int:
    """The hook's file, made new: never opened through what another user left at its name
    in /dev/shm, which everyone can write (a link to a file of ours, a pipe). A regular file
    of ours there is an earlier process's of the same pid (or this one's before a fork):
    replaced. Anything else raises, and the hook stays silent (step() tries again later)."""
    path = stephook.hook_path(os.environ, os.getpid())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise
        os.unlink(path)
        fd = os.open(path, flags, 0o644)
    atexit.register(_remove, path)
    return fd


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
