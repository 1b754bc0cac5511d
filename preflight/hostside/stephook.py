# The step hook's file, written once for both its ends: `preflight.watch.step()` writes it
# in a training process, the watch's sampler (joined into it by hostside/ship.py) reads it
# through /proc/<pid>/root, inside a container too. Standard library only, Python 3.6 syntax.
#
# One file a process, named for its pid in its own pid namespace: a few bytes, rewritten in
# place, holding the steps counted so far and the process's wall time at the last of them.
import os

MYPY = False
if MYPY:  # the types, for mypy only: the hosts' Python 3.6 imports no typing here
    from typing import Callable, Mapping, Optional, Tuple  # noqa: F401

HOOK_DIR_VAR = "PREFLIGHT_WATCH_DIR"  # where a process writes it, when set (its own path)
HOOK_NAME = "preflight-watch.%d"  # by the writing process's own pid
HOOK_SHM = "/dev/shm"


def hook_dirs(env):
    # type: (Mapping[str, str]) -> Tuple[str, ...]
    """Where a process with the environment env writes its file, in the order the sampler
    looks: its PREFLIGHT_WATCH_DIR alone where set; else /dev/shm, else its temp directory
    (TMPDIR, else /tmp) where /dev/shm cannot be written."""
    own = env.get(HOOK_DIR_VAR)
    if own:
        return (own,)
    return (HOOK_SHM, env.get("TMPDIR") or "/tmp")


def hook_line(count, wall_time):
    # type: (int, float) -> bytes
    """The file's whole text: steps, then the wall time of the last, fixed width (rewritten
    in place, so that a reader never sees a shorter text's leftovers)."""
    return b"%-20d %-20.3f\n" % (count, wall_time)


def hook_parse(text):
    # type: (str) -> Optional[Tuple[int, float]]
    """(steps, wall time of the last step) of a file's text; None where it holds neither."""
    fields = text.split()
    if len(fields) < 2:
        return None
    try:
        return int(fields[0]), float(fields[1])
    except ValueError:
        return None


def hook_path(env, pid, writable=os.access):
    # type: (Mapping[str, str], int, Callable[[str, int], bool]) -> str
    """The file process pid, with the environment env, writes."""
    found = hook_dirs(env)
    base = found[0] if len(found) == 1 or writable(found[0], os.W_OK) else found[1]
    return os.path.join(base, HOOK_NAME % pid)
