"""Validates inventory values before they can reach an SSH connection or a remote shell."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

# Host names and users: letters, digits and . _ - only, never a leading '-' (which ssh or a
# shell would read as an option, e.g. "-oProxyCommand=...").
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,252}$")
USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")
HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


class BadValue(ValueError):
    pass


# More hosts than any cluster has: a range past it is a typo (node[1-100000]), refused before
# it is expanded, not a run that fans out to a hundred thousand names.
MAX_HOSTS = 20_000
_BRACKET = re.compile(r"\[([^\]]*)\]")


def hostlist_size(pattern: str) -> int:
    """Returns how many names a Slurm hostlist expands to, without expanding it (a bound:
    ranges multiply across brackets; comma-separated lists add)."""
    total = 0
    for part in re.split(r",(?![^\[]*\])", pattern):
        n = 1
        for body in _BRACKET.findall(part):
            count = 0
            for item in body.split(","):
                lo, _, hi = item.partition("-")
                if lo.strip().isdigit() and hi.strip().isdigit():
                    count += abs(int(hi) - int(lo)) + 1
                else:
                    count += 1
            n *= max(count, 1)
        total += n
    return total


def bounded_hostlist(pattern: str) -> str:
    """Refuses a hostlist that would expand past MAX_HOSTS names."""
    size = hostlist_size(pattern)
    if size > MAX_HOSTS:
        raise BadValue(f"{pattern!r:.80} expands to {size:,} hosts, more than the "
                       f"{MAX_HOSTS:,} preflight accepts (a typo in a range?)")
    return pattern


def host_name(v: str) -> str:
    if not NAME_RE.match(v):
        raise BadValue(f"{v!r:.80} is not a valid host name (letters, digits, '.', '_', '-')")
    return v


def address(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise BadValue("expected an IP address or DNS name")
    try:
        return str(ipaddress.ip_address(v))
    except ValueError:
        pass
    if not HOSTNAME_RE.match(v):
        raise BadValue(f"{v!r:.80} is neither an IP address nor a DNS name")
    return v


def user(v: Any) -> str:
    if not isinstance(v, str) or not USER_RE.match(v):
        raise BadValue(f"{v!r:.80} is not a valid user name")
    return v


def port(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 65535:
        raise BadValue(f"{v!r:.40} is not a TCP port (an integer 1-65535)")
    return v


def command_path(v: Any) -> str:
    """An interpreter path or name; it is always shell-quoted, but never option-like."""
    if not isinstance(v, str) or not v.strip():
        raise BadValue("expected an interpreter path or name")
    if v.startswith("-") or any(c in v for c in "\x00\n\r"):
        raise BadValue(f"{v!r:.80} is not a usable interpreter path")
    return v


def file_path(v: Any) -> str:
    if not isinstance(v, str) or not v or "\x00" in v or "\n" in v:
        raise BadValue("expected a file path")
    return v


def jump(v: Any) -> str:
    """A ProxyJump value: '[user@]host[:port]' hops separated by commas, or 'none'."""
    if not isinstance(v, str) or not v.strip():
        raise BadValue("expected [user@]host[:port], hops separated by commas")
    for hop in v.split(","):
        m = JUMP_RE.match(hop.strip())
        if not m or (v.strip().lower() != "none" and m.group(2).startswith("-")):
            raise BadValue(f"{hop!r:.80} is not [user@]host[:port]")
        if m.group(1):
            user(m.group(1))
        if m.group(3) and not 1 <= int(m.group(3)) <= 65535:
            raise BadValue(f"{hop!r:.80}: port out of range")
    return v.strip()


JUMP_RE = re.compile(r"^(?:([^@\s]+)@)?([A-Za-z0-9_][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\])"
                     r"(?::(\d{1,5}))?$")

ROLES = ("worker", "server")


def roles(v: Any) -> tuple[str, ...]:
    """The roles a host may take in a plan: 'worker', 'server' or both (a list)."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not items or \
            not all(isinstance(r, str) and r in ROLES for r in items):
        raise BadValue(f"{v!r:.80} is not a list of roles (worker, server)")
    return tuple(r for r in ROLES if r in items)
