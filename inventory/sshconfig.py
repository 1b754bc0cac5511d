"""The user's OpenSSH client config, read as `ssh` reads it (ssh_config(5)): ~/.ssh/config,
then /etc/ssh/ssh_config; or the one file of `-F` ("none": no config at all). The first value
obtained for a parameter wins; `Include` is followed (paramiko does not), relative paths
under ~/.ssh (or /etc/ssh for the system file)."""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Optional

import paramiko

from preflight.inventory.errors import InventoryError

USER_CONFIG = "~/.ssh/config"
SYSTEM_CONFIG = "/etc/ssh/ssh_config"
MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
_INCLUDE = re.compile(r"^\s*include\s*(=\s*|\s)(.*)$", re.IGNORECASE)


class SshConfig:
    """Looks hosts up in the parsed config; `path` names it in messages."""

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        try:
            self._config = paramiko.SSHConfig.from_text(text)
        except (paramiko.ssh_exception.ConfigParseError, ValueError) as e:
            raise InventoryError(path, f"cannot read the OpenSSH config: {e}") from None

    def lookup(self, name: str) -> dict[str, Any]:
        """The options for a host as typed (an alias or a name); tokens expanded."""
        try:
            return dict(self._config.lookup(name))
        except Exception as e:  # a Match exec that fails, a bad token: name the file
            raise InventoryError(self.path, f"cannot look up {name!r}: "
                                 f"{type(e).__name__}: {e}") from None


def _expand_includes(path: str, base: str, depth: int, top: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as e:
        raise InventoryError(top, f"cannot read {path}: {e.strerror}") from None
    out = []
    for line in lines:
        m = _INCLUDE.match(line)
        if not m:
            out.append(line)
            continue
        if depth >= MAX_INCLUDE_DEPTH:
            raise InventoryError(path, "Include nested too deeply (a loop?)")
        for pattern in m.group(2).split():
            pattern = os.path.expanduser(pattern.strip('"'))
            if not os.path.isabs(pattern):
                pattern = os.path.join(base, pattern)
            for inc in sorted(glob.glob(pattern)):  # OpenSSH: a glob that matches nothing is fine
                out.append(_expand_includes(inc, base, depth + 1, top))
    return "\n".join(out)


def load(path: Optional[str]) -> SshConfig:
    """Returns the config ssh would read: path (-F) alone, or the user's and the system's."""
    if path == "none":
        return SshConfig("", "none")
    if path is not None:
        full = os.path.expanduser(path)
        if not os.path.isfile(full):
            raise InventoryError(path, "no such OpenSSH config file")
        return SshConfig(_expand_includes(full, os.path.expanduser("~/.ssh"), 0, path), path)
    texts = []
    for p, base in ((USER_CONFIG, "~/.ssh"), (SYSTEM_CONFIG, "/etc/ssh")):
        full = os.path.expanduser(p)
        if os.path.isfile(full):
            texts.append(_expand_includes(full, os.path.expanduser(base), 0, full))
    # A file's options before its first Host apply to every host: "Host *" keeps the
    # system file's from joining the user file's last block.
    return SshConfig("\nHost *\n".join(texts), " + ".join([USER_CONFIG, SYSTEM_CONFIG]))
