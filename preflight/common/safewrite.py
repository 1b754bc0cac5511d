"""Every file preflight writes on the machine it runs on (reports, baselines, launch scripts,
launch records, the watch's page) goes through write_text: preflight runs as root, into
directories other users share.

- The text goes to a temp file made by mkstemp in the destination's directory (a name no
  one can plant a link at beforehand), its mode set on the descriptor, then renamed into
  place: a reader sees the old file or the whole new one, never half.
- A destination that is a symbolic link is followed only where the kernel's own
  protected_symlinks would follow it for us: a link of ours, of the directory's owner, or in
  a directory that is neither sticky nor world-writable. A link another user planted in
  /tmp is refused, naming it and its owner; root's rename would otherwise replace whatever
  it points at.
- A destination that exists and is not a regular file (a device, a pipe, a socket) is
  refused: `--json /dev/sdX` would write a disk. `-` is standard output.

Logs written as they go (the watch's, a killed run's end record, GitHub's step summary)
are opened through open_append, under the same rules."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from typing import Optional, TextIO


class UnsafeWrite(Exception):
    """A destination preflight will not write: one line naming it and why (the CLI says it
    as bad input, exit 2)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: not written: {why}")

STDOUT = "-"
LINKS_MAX = 40  # links followed in a row, as the kernel's own bound (ELOOP past it)


def write_text(path: str, text: str, mode: Optional[int] = None) -> None:
    """Writes text to path as the module says; mode None: 0666 less the umask (a report is
    shared: CI artifacts, a web server). Raises UnsafeWrite naming the path where it is a
    link it must not follow or not a regular file; OSError where the write itself fails."""
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = _destination(path)
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".preflight-", suffix=".tmp",
                               dir=os.path.dirname(target) or ".")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_append(path: str) -> TextIO:
    """The file path names, opened to append to (a log, written as it goes: no temp file
    and rename), created 0666 less the umask where it is new; the same links followed and
    files refused as write_text's, and its last part opened with O_NOFOLLOW (a link planted
    there since it was looked at is not followed either)."""
    target = _destination(path)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # made a pipe since it was looked at
            raise UnsafeWrite(path, "not a regular file")
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def _destination(path: str) -> str:
    """The file path names once its trusted links are followed; raises UnsafeWrite where a
    link is not to be followed or the file is not a regular one."""
    here = os.path.abspath(path)
    for _ in range(LINKS_MAX):
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return here  # a new file
        if stat.S_ISLNK(st.st_mode):
            why = _untrusted(here, st)
            if why:
                raise UnsafeWrite(path, why)
            here = os.path.join(os.path.dirname(here), os.readlink(here))
            here = os.path.abspath(here)
            continue
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeWrite(path, "not a regular file (a device, a pipe or a socket); name "
                              "a file, or - for standard output")
        return here
    raise UnsafeWrite(path, f"more than {LINKS_MAX} links in a row")


def _untrusted(link: str, st: os.stat_result) -> Optional[str]:
    """Why the link is not to be followed (None where it is): what protected_symlinks asks,
    that a link in a sticky world-writable directory be ours or the directory owner's,
    asked of every sticky or world-writable one."""
    euid = os.geteuid()
    if st.st_uid == euid:
        return None
    parent = os.path.dirname(link)
    d = os.stat(parent)
    if st.st_uid == d.st_uid:
        return None
    if d.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
        return (f"{link} is a link owned by uid {st.st_uid} in {parent}, a directory every "
                "user can write into: preflight does not write through another user's link")
    return None
