"""known_hosts read as OpenSSH reads it (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT): plain and
hashed names, `[host]:port`, wildcard and negated patterns, and the `@cert-authority` and
`@revoked` markers. paramiko's own reader fails a whole file on a marker line, so every host
read "unknown"; here a line that cannot be read is skipped with a warning naming file:line."""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import os
import re
import secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

MARKERS = ("@cert-authority", "@revoked")


@dataclass(frozen=True)
class Entry:
    """One line: its marker ('' for a plain key), host field, key, and where it was read."""

    marker: str
    hosts: str
    key_type: str
    key: bytes  # the key blob, as the server sends it
    where: str  # file:line

    def matches(self, name: str) -> bool:
        """True when the host field names `name` (already lowercased, `[h]:p` off port 22)."""
        if self.hosts.startswith("|1|"):
            return _hashed_match(self.hosts, name)
        hit = False
        for pattern in self.hosts.lower().split(","):
            negated = pattern.startswith("!")
            if wildcard_match(name, pattern[1:] if negated else pattern):
                if negated:
                    return False  # a negated match wins over any other (OpenSSH)
                hit = True
        return hit


def wildcard_match(name: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: '*' and '?' are the only wildcards ('[' is literal, as in
    '[host]:2222')."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.DOTALL) is not None


def _hashed_match(field: str, name: str) -> bool:
    try:
        _, _, salt_b64, digest_b64 = field.split("|")
        salt, digest = base64.b64decode(salt_b64), base64.b64decode(digest_b64)
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)


def hashed_name(name: str) -> str:
    """Returns name hashed as `HashKnownHosts yes` writes it: |1|salt|HMAC-SHA1(salt, name)."""
    salt = secrets.token_bytes(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


@dataclass(frozen=True)
class KnownHosts:
    """Every readable line of some known_hosts files, and a warning per unreadable one."""

    entries: tuple[Entry, ...] = ()
    warnings: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    def for_names(self, names: Iterable[str], marker: str = "") -> list[Entry]:
        wanted = [n.lower() for n in names]
        return [e for e in self.entries if e.marker == marker
                and any(e.matches(n) for n in wanted)]


def parse_line(line: str, where: str) -> Optional[Entry]:
    """Returns the line's entry, None for a blank or comment line; raises ValueError."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    fields = text.split()
    marker = ""
    if fields[0].startswith("@"):
        if fields[0] not in MARKERS:
            raise ValueError(f"unknown marker {fields[0]!r}")
        marker, fields = fields[0][1:], fields[1:]
    if len(fields) < 3:
        raise ValueError("expected: [marker] hosts key-type base64-key [comment]")
    hosts, key_type, b64 = fields[:3]
    try:
        blob = base64.b64decode(b64, validate=True)
    except binascii.Error:
        raise ValueError(f"the {key_type} key is not valid base64") from None
    if _blob_type(blob) != key_type:
        raise ValueError(f"the key is not of type {key_type}")
    return Entry(marker, hosts, key_type, blob, where)


def _blob_type(blob: bytes) -> Optional[str]:
    """The type name a key blob starts with (an SSH string), or None."""
    if len(blob) < 4:
        return None
    n = int.from_bytes(blob[:4], "big")
    try:
        return blob[4:4 + n].decode("ascii") if 0 < n < 64 and len(blob) >= 4 + n else None
    except UnicodeDecodeError:
        return None


_cache_lock = threading.Lock()
_cache: dict[tuple[str, float, int], tuple[list[Entry], list[str]]] = {}


def _read_file(path: str) -> tuple[list[Entry], list[str]]:
    """Reads one file (cached by mtime and size: a run asks once per host)."""
    try:
        st = os.stat(path)
    except OSError:
        return [], []  # an absent file is no error (OpenSSH reads what exists)
    key = (path, st.st_mtime, st.st_size)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    entries, warnings = [], []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError as e:
        return [], [f"{path}: cannot read ({e.strerror}); its keys are not used"]
    for i, line in enumerate(lines, 1):
        try:
            entry = parse_line(line, f"{path}:{i}")
        except ValueError as e:
            warnings.append(f"{path}:{i}: line skipped: {e}")
            continue
        if entry is not None:
            entries.append(entry)
    with _cache_lock:
        _cache[key] = (entries, warnings)
    return entries, warnings


def load(paths: Sequence[str]) -> KnownHosts:
    """Returns the entries of the files that exist, in order."""
    entries: list[Entry] = []
    warnings: list[str] = []
    for path in paths:
        e, w = _read_file(os.path.expanduser(path))
        entries += e
        warnings += w
    return KnownHosts(tuple(entries), tuple(warnings), tuple(paths))


class Status(str, enum.Enum):
    KNOWN = "known"
    CHANGED = "changed"  # the names are known with another key: refused, always
    REVOKED = "revoked"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Match:
    status: Status
    entry: Optional[Entry] = None  # the line that decided (the old key, for CHANGED)


def check_key(known: KnownHosts, names: Sequence[str], key_type: str, key: bytes) -> Match:
    """Judges a plain host key for a host known under any of names, as OpenSSH does: a
    revoked key is refused; the same key under a name is known; another key of the same
    type under a name is a changed key. Keys of other types do not decide (the connection
    asks for a known type first: see known_types)."""
    for e in known.for_names(names, "revoked"):
        if e.key == key:
            return Match(Status.REVOKED, e)
    plain = known.for_names(names)
    for e in plain:
        if e.key == key:
            return Match(Status.KNOWN, e)
    for e in plain:
        if e.key_type == key_type:
            return Match(Status.CHANGED, e)
    return Match(Status.UNKNOWN)


def known_types(known: KnownHosts, names: Sequence[str]) -> list[str]:
    """The plain key types recorded for the names (OpenSSH asks the server for these first,
    so a host known by its RSA key is not refused for offering Ed25519 first)."""
    return list(dict.fromkeys(e.key_type for e in known.for_names(names)))


def line_for(names: Sequence[str], key_type: str, key_b64: str, hashed: bool) -> str:
    """The line OpenSSH would add for a newly accepted key (hashed: one line per name)."""
    if hashed:
        return "".join(f"{hashed_name(n.lower())} {key_type} {key_b64}\n" for n in names)
    return f"{','.join(n.lower() for n in names)} {key_type} {key_b64}\n"


_append_lock = threading.Lock()


def append(path: str, text: str) -> None:
    """Appends to a known_hosts file (0600, its directory 0700); many hosts answer at once,
    so appends must not interleave."""
    path = os.path.expanduser(path)
    with _append_lock:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as fh:
            fh.write(text)
