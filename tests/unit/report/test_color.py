"""Colour as shell users expect it: a terminal only, never with NO_COLOR or TERM=dumb,
--color always/never overriding both."""

from __future__ import annotations

import io

import pytest

from preflight.report.terminal import use_color


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("choice,tty,env,expected", [
    ("auto", True, {}, True),
    ("auto", False, {}, False),
    ("auto", True, {"NO_COLOR": "1"}, False),
    ("auto", True, {"NO_COLOR": ""}, True),  # no-color.org: set to a non-empty value
    ("auto", True, {"TERM": "dumb"}, False),
    ("always", False, {"NO_COLOR": "1"}, True),
    ("never", True, {}, False),
], ids=["tty", "pipe", "no-color", "no-color-empty", "dumb", "always", "never"])
def test_use_color(choice, tty, env, expected):
    stream = Tty() if tty else io.StringIO()
    assert use_color(choice, stream, env) is expected
