"""What a Paddle job's logs say, read alike by the checks that start a job (the all-reduce, the
PS round) and by the watch that follows one. For now: redaction, so that no secret a log line
or a command line holds (`PASSWORD=...`, `api_key=...`, `--token=...`) reaches a finding, a
report or a results log, whichever of them quotes it."""

from __future__ import annotations

import re

_SECRET = re.compile(r"(?i)\b(\w*(?:passw|secret|token|api_?key|credential)\w*)=\S+")


def redact(line: str) -> str:
    """The line with the value of every secret-looking name=value hidden."""
    return _SECRET.sub(lambda m: m.group(1) + "=***", line)
