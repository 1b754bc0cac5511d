"""What looks secret, hidden wherever preflight writes: reports in every format, the watch's
results log and console, act records, drain reasons, facts. One vocabulary for all of them,
since reports and logs are shared: that is what they are for.

Hidden: the value of a secret-looking name (`PADDLE_ACCESS_KEY=abc`, `"token": "abc"`,
`--password abc`, `DB_PASS: abc`), an HTTP credential (`Authorization: Bearer ...`, `Basic
...`), a URL's password (`https://user:pass@host`), a private key block (PEM), and the shapes of
well-known tokens (AWS access key ids, GitHub and Slack tokens, JWTs). The name, the user and
the shape stay: what was there is still readable, never what it was."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

HIDDEN = "***"
# What the host side writes for a variable it hid before it left the host (the container
# part of the probe: hostside/container.py, whose names are this vocabulary's too).
HOST_HIDDEN = "<redacted>"

# A name that says its value is secret: a word of it, or a _KEY / _PASS suffix (an access
# key, a database password), in any case.
_WORDS = (r"passw(?:or)?d|passwd|passphrase|secret|token(?!s)|api[_-]?key|apikey|credential|"
          r"private[_-]?key|access[_-]?key|session[_-]?id|cookie|authorization")
NAME = re.compile(rf"(?i)^[\w.-]*(?:{_WORDS})[\w.-]*$|^[\w.-]*[_-](?:key|pass)$")
_NAME = rf"[\w.-]*(?:{_WORDS})[\w.-]*|[\w.-]*[_-](?:key|pass)\b"
# A value up to what ends it in a command line, a log line or a JSON text: never a quote or
# a backslash (a JSON string's end or escape stays whole).
_VALUE = r"[^\s\"'\\,;&]+"
# What a value already hidden, or an HTTP scheme whose credential is hidden after it, starts
# with: kept.
_KEPT = rf"{re.escape(HIDDEN)}|(?:Bearer|Basic|Digest|Token)\s"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # A private key block, whole, within one text (never across a quote: one JSON string).
    (re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[^\"]*?-----END \1PRIVATE KEY-----"),
     rf"-----BEGIN \1PRIVATE KEY----- {HIDDEN} -----END \1PRIVATE KEY-----"),
    # An HTTP credential after its scheme.
    (re.compile(r"(?i)\b(Bearer|Basic|Digest|Token)(\s+)[\w.~+/=-]{6,}"), rf"\1\2{HIDDEN}"),
    # A URL's password (its user stays).
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@\"']*):[^\s/@\"']+@"), rf"\1:{HIDDEN}@"),
    # name="value with spaces", "name": "value": the whole quoted value.
    (re.compile(rf"(?i)\b({_NAME})([\"']?\s*[=:]\s*)([\"'])(?!{_KEPT})[^\"'\\]+\3"),
     rf"\1\2\3{HIDDEN}\3"),
    # name=value, name: value.
    (re.compile(rf"(?i)\b({_NAME})([\"']?\s*[=:]\s*)(?!{_KEPT}|\s|[\"'])({_VALUE})"),
     rf"\1\2{HIDDEN}"),
    # --name value (an option's value after a space).
    (re.compile(rf"(?i)(--?(?:{_NAME}))(\s+)(?!-|{_KEPT})({_VALUE})"),
     rf"\1\2{HIDDEN}"),
    # Tokens by their shape, wherever they stand.
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}\b|"
                r"\bgithub_pat_[A-Za-z0-9_]{30,}\b|\bxox[abprs]-[A-Za-z0-9-]{10,}\b|"
                r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}\b|\bsk-[A-Za-z0-9_-]{20,}\b"),
     HIDDEN),
)
# What every pattern above needs somewhere in a text, and a secret name too, lower-cased
# (a superset of them all: _WORDS, the _KEY / _PASS suffix, the schemes, a URL, a key block,
# each token shape's start; each by the shortest word inside every spelling of it: "key" for
# api_key, privateKey, access-key, a _KEY suffix and a PRIVATE KEY block, "pass" for passwd,
# passphrase and a _PASS suffix, "session" for its ids). A text without any is returned as it
# is: most text (a sample's figures, a command line, a log line) holds none, and seven
# substitutions a string over every string of every sample were half of what the watch spent
# judging. Plain substrings, as few as hold them all (each is a pass over every sample line
# of a thousand hosts, every interval): one regex of them all took 0.5 ms a sample line.
_MAY_HOLD = (
    "pass", "secret", "token", "key", "credential", "session", "cookie", "authorization",
    "bearer", "basic", "digest", "://",
    "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "eyj", "sk-",
)
_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----")
_END = re.compile(r"-----END ([A-Z0-9 ]*)PRIVATE KEY-----")


def may_hold_secret(text: str) -> bool:
    """False where nothing in the text could be hidden (nor a name hide() or scrub() read as
    secret): the text, or a JSON text's every string and key, is kept as it is."""
    low = text.lower()
    return any(word in low for word in _MAY_HOLD)


def hide(text: str) -> str:
    """The text with every secret in it hidden."""
    if not text or not may_hold_secret(text):
        return text
    for pattern, to in _PATTERNS:
        text = pattern.sub(to, text)
    return text


def hide_lines(lines: Sequence[str]) -> list[str]:
    """Lines (a log's tail), each hidden, and the lines inside a private key block that
    spans them (each line of it alone looks like nothing)."""
    out: list[str] = []
    inside = False
    for line in lines:
        if inside:
            if _END.search(line):
                inside = False
                out.append(_END.sub(r"-----END \1PRIVATE KEY-----", line[line.index("-----"):]))
            else:
                out.append(HIDDEN)
            continue
        said = hide(line)
        if _BEGIN.search(said) and not _END.search(said):
            inside = True
        out.append(said)
    return out


def is_secret_name(name: str) -> bool:
    """Whether a variable's or a field's name says its value is secret."""
    return bool(NAME.match(name))


def hide_variable(name: str, value: str) -> str:
    """A variable's value as it may be written: hidden whole where its name says secret,
    else with any secret inside it hidden (a URL with a password)."""
    return HIDDEN if is_secret_name(name) else hide(value)


T = TypeVar("T")


def scrub(obj: T) -> T:
    """obj with every string inside it hidden, at any depth (dicts, lists, tuples, frozen
    dataclasses), a dict's values under a secret name hidden whole, and lists of lines read
    as lines (a private key block spanning them). What is not a string is kept."""
    return _scrub(obj)  # type: ignore[no-any-return]


def _scrub(obj: Any) -> Any:
    if isinstance(obj, str):
        return hide(obj)
    if isinstance(obj, Mapping):
        return {k: (HIDDEN if isinstance(k, str) and isinstance(v, str) and v
                    and is_secret_name(k) else _scrub(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(x, str) for x in obj):
            lines = hide_lines(obj)
        else:
            lines = [_scrub(x) for x in obj]
        if isinstance(obj, list):
            return lines
        return tuple(lines) if type(obj) is tuple else type(obj)(*lines)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            v = getattr(obj, f.name)
            new = _scrub(v)
            if new is not v and new != v:
                changes[f.name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj
