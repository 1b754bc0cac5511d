"""What hosts say reaches the terminal inside preflight's own lines, made visible: a newline
or an escape sequence in a fact or a rank's log would act on the terminal (a forged "GO"
line after the real NO-GO, a cleared screen, a line read in reverse)."""

from __future__ import annotations

import time

import pytest
from support import cluster, paddle, report_doc

from preflight.common.visible import visible
from preflight.judge import judge, run_checks
from preflight.model.findings import Finding, Status
from preflight.report import terminal
from preflight.report.jsonreport import typed
from preflight.watch import view

FORGED = "2.6.2\n\x1b[2J\x1b[32mGO: all 3 hosts ready\x1b[0m\r\u202e"


@pytest.mark.parametrize("text,shown", [
    ("plain text, tabs\tand accents: é ü 中", "plain text, tabs\tand accents: é ü 中"),
    ("a\nb\rc", "a\\nb\\rc"),
    ("\x1b[31mred", "\\x1b[31mred"),
    ("\x00\x07\x7f\x9b", "\\x00\\x07\\x7f\\x9b"),
    ("abc\u202edef\u2066", "abc\\u202edef\\u2066"),
    ("", ""),
])
def test_every_control_character_is_shown_as_its_escape(text, shown):
    assert visible(text) == shown


def test_a_forged_verdict_in_a_hosts_fact_stays_inside_its_finding_line():
    c = cluster(node01={}, node02={"paddle": paddle(FORGED)}, node03={})
    report = typed(report_doc(c, judge(c, run_checks(c)), started_at=1.0))
    for detail in (False, True):
        text = terminal.render(report, color=False, width=0, detail=detail)
        assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
        # The only line that starts with a verdict is the real one, the last.
        verdicts = [ln for ln in text.splitlines() if ln.startswith(("GO", "NO-GO"))]
        assert len(verdicts) == 1 and text.rstrip("\n").splitlines()[-1] == verdicts[0]
        assert "\\x1b[32mGO: all 3 hosts ready" in text
    # Colour is preflight's own: its escapes around the status only.
    coloured = terminal.render(report, color=True, width=0)
    assert "\x1b[2J" not in coloured and "\x1b[32mGO: all" not in coloured


def test_the_watchs_console_line_shows_a_ranks_log_line_escaped():
    f = Finding("dead", Status.FAIL, ("n1",), "n1 rank 1 exited: its log ended: "
                "Traceback\n\x1b[1A\x1b[2KOK all ranks healthy")
    line = view.line(f, 0, at=time.time())
    assert "\n" not in line and "\x1b" not in line
    assert "Traceback\\n\\x1b[1A\\x1b[2KOK all ranks healthy" in line
