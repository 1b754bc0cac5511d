"""The terminal view's width: a terminal's lines fit it; a pipe, a file or a CI log gets whole
lines, whatever COLUMNS a tool exported."""

from __future__ import annotations

import io

from support import cluster, paddle, report_doc

from preflight.judge import judge, run_checks
from preflight.report import terminal
from preflight.report.jsonreport import typed


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def long_report() -> str:
    c = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={})
    findings = run_checks(c)
    return terminal.render(typed(report_doc(c, judge(c, findings), started_at=1.0)),
                           width=terminal.width_of(io.StringIO()))


def test_a_pipe_gets_whole_lines_even_with_columns_exported(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert terminal.width_of(io.StringIO()) == 0
    text = long_report()
    assert max(len(ln) for ln in text.splitlines()) > 120  # the lines a CI log cut before
    assert not any(ln.endswith("...") for ln in text.splitlines())  # nothing cut


def test_a_terminal_gets_lines_cut_to_its_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "77")
    assert terminal.width_of(Tty()) == 77
    c = cluster(node01={}, node02={"paddle": paddle("2.6.2")}, node03={})
    text = terminal.render(typed(report_doc(c, judge(c, run_checks(c)), started_at=1.0)),
                           width=terminal.width_of(Tty()))
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 77
    assert any(ln.endswith("...") for ln in lines)  # a cut line says it was cut
