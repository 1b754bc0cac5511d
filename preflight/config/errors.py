"""Operator errors: one line naming the file (and line), the host and the field; exit 2."""

from __future__ import annotations

from typing import Optional


class InputError(Exception):
    """A malformed inventory, policy or flag; str() is the one line the CLI prints (exit 2)."""

    def __init__(self, path: str, message: str, host: Optional[str] = None,
                 field: Optional[str] = None, line: Optional[int] = None) -> None:
        self.path, self.host, self.field, self.line = path, host, field, line
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


def read_input(path: str, error: type[InputError] = InputError) -> str:
    """Returns an input file's text; raises `error` naming it when missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise error(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(path, f"cannot read: {e}") from None
