"""A report read back is decoded into the typed Report: a malformed one is one line and exit
2, never a renderer's crash. Real reports pass; a report with any part replaced by another
JSON value either is refused with one line naming the field, or renders in every format."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reportdocs import full_doc, paths
from support import cluster, report_doc, same

from preflight import judge as J
from preflight.config.errors import InputError
from preflight.history import diff
from preflight.model.facts import SectionError, SystemFacts
from preflight.model.report import Report
from preflight.report import html, jsonreport, junit, markdown, terminal


def read_back(tmp_path, doc: Any) -> Report:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    return jsonreport.read(str(p))


def render_all(doc: Report) -> None:
    terminal.render(doc, width=100, detail=True)
    terminal.verdict_line(doc, width=100)
    junit.render(doc)
    markdown.render(doc)
    html.render(doc)
    J.rejudged(doc, "warn")
    diff.lines(diff.compare(doc, doc))


def test_real_reports_are_read_and_render(tmp_path):
    doc = full_doc()
    assert doc["plan"]["excluded"] and doc["network"]["allreduce"]["sizes"]
    render_all(read_back(tmp_path, doc))
    render_all(read_back(tmp_path, report_doc(cluster(**same(2)),
                                              J.judge(cluster(**same(2)), []))))


@pytest.mark.parametrize("path,value,field", [
    (("hosts",), [1, 2], "hosts"),
    (("hosts", "node01"), 5, "hosts.node01"),
    (("findings",), "x", "findings"),
    (("findings", 0, "hosts"), "node01", "findings[0].hosts"),
    (("plan", "excluded", "node03"), "paddle", "plan.excluded.node03"),
    (("network", "links", 0, "received_bps"), "fast", "network.links[0].received_bps"),
    (("network", "allreduce", "sizes", 0), None, "network.allreduce.sizes[0]"),
])
def test_a_malformed_report_is_one_line_naming_the_field(tmp_path, path, value, field):
    doc = full_doc()
    at = doc
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    with pytest.raises(InputError) as err:
        read_back(tmp_path, doc)
    assert f"field '{field}': not a report preflight can read: expected " in str(err.value)
    assert "\n" not in str(err.value)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 10 ** 12) |
                    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


FULL = full_doc()
PATHS = [p for p in paths(FULL) if p]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(PATHS), value=JSON)
def test_any_part_replaced_is_refused_or_renders(tmp_path_factory, where, value):
    doc = copy.deepcopy(FULL)
    at = doc
    for key in where[:-1]:
        at = at[key]
    at[where[-1]] = value
    tmp = tmp_path_factory.mktemp("fuzz")
    try:
        back = read_back(tmp, doc)
    except InputError as e:
        assert "\n" not in str(e)
        return
    render_all(back)


def test_a_report_read_and_written_again_is_the_same_document(tmp_path):
    doc = full_doc()
    doc.update(command="check", local=False, inventory="/x/inv.yaml", limit=["node0[1-2]"],
               inventory_format="auto", ssh_config=None, interrupted=False, fail_on="fail",
               rechecked_over_ssh={"node02": "drained by preflight"},
               audit={"baseline": "/x/b.json", "taken_at": 1.0, "taken_on": "h",
                      "tolerance": 0.2, "max_age_s": None})
    doc["hosts"]["node01"]["ssh"] = {"user": "ops", "port": 2222, "via": ["ops@bastion:22"]}
    report = read_back(tmp_path, doc)
    assert report.hosts["node01"].ssh is not None and report.audit is not None
    assert jsonreport.encode(report) == doc
    # What the types do not know (a transport's notes, a later release's keys) is kept
    # where the document is at hand, as `preflight report --json` has it.
    later = dict(doc, carried_by="pigeon")
    assert jsonreport.encode(read_back(tmp_path, later), later) == later


def test_a_facts_section_of_another_shape_is_that_sections_error_not_a_refusal(tmp_path):
    doc = full_doc()
    doc["hosts"]["node01"]["facts"]["cpu"] = {"logical": "many"}
    del doc["hosts"]["node01"]["facts"]["memory"]
    report = read_back(tmp_path, doc)
    facts = report.hosts["node01"].facts
    assert facts is not None and facts.cpu == SectionError(
        "not readable in this report: logical: expected a whole number, got a string 'many'")
    assert facts.memory == SectionError("not in this report")
    text = terminal.render(report, width=200)
    assert "node01" in text and isinstance(facts.system, SystemFacts)  # the rest reads
    md = markdown.render(report)
    assert "error: not readable in this report: logical: expected a whole number" in md
    assert "error: not in this report" in md
