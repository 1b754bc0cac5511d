"""The probe as the hosts get it (the joined text), for the tests that run it here."""

from __future__ import annotations

import sys
from typing import Any

from preflight.hostside.ship import probe as shipped


def probe_cmd(*args: str, python: str = sys.executable) -> list[str]:
    """argv running the shipped probe with python, as its main program."""
    return [python, "-c", shipped(), *args]


def shipped_ns() -> dict[str, Any]:
    """The shipped probe's names, defined without running it (not its __main__)."""
    ns: dict[str, Any] = {"__name__": "preflight_probe"}
    exec(compile(shipped(), "preflight-probe", "exec"), ns)
    return ns
