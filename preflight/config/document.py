"""Documents read back (a policy, a report, a baseline, a results log, a plan) turned into typed
values one field at a time, with one kind of error: an InputError naming the file, the line
where it is known (YAML keys, results-log records), the host and the field's dotted path."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn, Optional

from preflight.config.errors import InputError, shown
from preflight.config.yamlfile import line_of


class Fields:
    """One mapping of a document. `prefix` is the dotted path that led here ("baseline"),
    `line` the line of the whole record when keys have none of their own (JSON lines)."""

    def __init__(self, path: str, data: Mapping[Any, Any], prefix: str = "",
                 host: Optional[str] = None, line: Optional[int] = None) -> None:
        self.path, self.data, self.prefix, self.host, self.line = path, data, prefix, host, line

    def field(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def fail(self, message: str, key: Optional[str] = None) -> NoReturn:
        """Raises the one-line error about key (or about this mapping as a whole)."""
        line = (line_of(self.data, key) if key is not None else None) or self.line
        raise InputError(self.path, message[:300], host=self.host,
                         field=self.field(key) if key is not None else self.prefix or None,
                         line=line)

    def has(self, key: str) -> bool:
        return key in self.data

    def keys_within(self, allowed: set[str], what: str = "key") -> None:
        """Refuses a key that is not allowed, naming the ones that are."""
        for key in self.data:
            if key not in allowed:
                self.fail(f"unknown {what} (allowed: {', '.join(sorted(allowed))})", str(key))

    def number(self, key: str, optional: bool = False) -> Optional[float]:
        """A finite number >= 0 (None when optional and absent or null): YAML's .nan compares
        false with every bar, and a NaN limit would switch its check off."""
        v = self.data.get(key)
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            self.fail(f"expected a finite number >= 0, got {shown(v, 120)}", key)
        return float(v)

    def count(self, key: str, low: int = 1, high: int = 4096) -> int:
        """An integer from low to high."""
        v = self.data.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            self.fail(f"{shown(v, 120)} is not a count from {low} to {high}", key)
        return v

    def text(self, key: str, optional: bool = False) -> Optional[str]:
        """A non-empty string (None when optional and absent or null)."""
        v = self.data.get(key)
        if v is None and optional:
            return None
        if not isinstance(v, str) or not v:
            self.fail(f"expected a string, got {shown(v, 120)}", key)
        return v

    def strings(self, key: str, what: str = "a list of strings") -> list[str]:
        """A list of non-empty strings."""
        v = self.data.get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            self.fail(f"expected {what}", key)
        return list(v)

    def mapping(self, key: str, what: str = "a mapping", optional: bool = False,
                host: Optional[str] = None) -> Optional[Fields]:
        """The mapping under key, to read further (None when optional and absent or null)."""
        v = self.data.get(key)
        if v is None and optional:
            return None
        if not isinstance(v, dict):
            self.fail(f"expected {what}", key)
        return Fields(self.path, v, self.field(key), host or self.host, self.line)

    def at(self, key: str, what: str = "a mapping") -> Fields:
        """The mapping under key, which must be there."""
        sub = self.mapping(key, what)
        assert sub is not None
        return sub
