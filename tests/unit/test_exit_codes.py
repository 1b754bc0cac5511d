"""One exit-code contract, held under -v and -q: an internal error (a bug) exits 3 whatever
the flags, never 1, which is NO-GO's code to a gate that reads it."""

from __future__ import annotations

import pytest

from preflight import cli
from preflight.cli import commands
from preflight.cli.commands import EXIT_INTERNAL


def _bug(args: object) -> int:
    raise RuntimeError("a bug")


@pytest.mark.parametrize("flags", [[], ["-v"], ["-q"]], ids=["plain", "verbose", "quiet"])
def test_an_internal_error_exits_3_under_every_flag(monkeypatch, capsys, flags):
    monkeypatch.setitem(commands.COMMANDS, "check", _bug)
    assert cli.main(["check", *flags]) == EXIT_INTERNAL == 3
    err = capsys.readouterr().err
    if flags == ["-v"]:  # the traceback, to find the bug by
        assert "Traceback (most recent call last)" in err and "RuntimeError: a bug" in err
    else:
        assert err.strip() == "preflight: internal error: RuntimeError: a bug (run with -v " \
            "for the traceback)"
