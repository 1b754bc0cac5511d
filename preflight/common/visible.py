"""Text from hosts made safe for a terminal: what a host sends (a rank's log line, a fact, an
error's text) reaches the console inside preflight's own lines, and a control character in
it would act there: a newline and "GO: all 3 hosts ready" forge a line after the real NO-GO,
an escape sequence recolours, moves the cursor or retitles the window, a bidirectional
override reorders what is read. Each is shown as its escape instead (\\n, \\x1b, \\u202e).
The reports keep the text as it came (JSON, HTML and JUnit escape it their own way)."""

from __future__ import annotations

import re

# C0 controls but the tab, DEL, C1 controls, and Unicode's bidirectional embeddings,
# overrides and isolates, and the line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e"
                      "\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(text: str) -> str:
    """text with every control character shown as its escape, for a terminal."""
    return _CONTROL.sub(_escape, text) if text else text
