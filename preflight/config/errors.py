"""Operator errors: one line naming the file (and line), the host and the field; exit 2."""

from __future__ import annotations

import reprlib
from typing import Any, Optional

# The most a file read as input may hold: an inventory of the most hosts preflight accepts
# is a few MiB; a larger file is a mistake (a log, a dump) that would take minutes to parse.
INPUT_MAX_BYTES = 32 << 20

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxset = 2, 4, 4, 4, 4
_SHORT.maxstring = _SHORT.maxother = 60


def shown(value: Any, width: int = 80) -> str:
    """value's repr for a message, at most width characters, built no longer than that (a
    value's whole repr, of a structure aliases built, can take minutes and gigabytes)."""
    text = _SHORT.repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


class InputError(Exception):
    """A malformed inventory, policy or flag; str() is the one line the CLI prints (exit 2)."""

    def __init__(self, path: str, message: str, host: Optional[str] = None,
                 field: Optional[str] = None, line: Optional[int] = None) -> None:
        self.path, self.host, self.field, self.line = path, host, field, line
        self.message = message  # what is wrong, without where
        where = f"{path}:{line}" if line else path
        parts = [where]
        if host is not None:
            parts.append(f"host {host!r}")
        if field is not None:
            parts.append(f"field {field!r}")
        # One line whatever the message quotes (YAML's reader errors span two).
        super().__init__(" ".join((": ".join(parts) + ": " + message).split()))


class UsageError(Exception):
    """A bad invocation that names no input file (a missing output directory, a missing
    argument); printed as one line, exit code 2."""


def read_input(path: str, error: type[InputError] = InputError,
               limit: int = INPUT_MAX_BYTES) -> str:
    """Returns an input file's text; raises `error` naming it when missing, unreadable or
    larger than limit bytes (read no further than that)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(limit + 1)
    except FileNotFoundError:
        raise error(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(path, f"cannot read: {e}") from None
    if len(text) > limit:
        raise error(path, f"larger than the {limit >> 20} MiB preflight reads as this input")
    return text
