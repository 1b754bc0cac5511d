"""Every golden fixture: a real probe's section parses to the fact recorded beside it
(tests/fixtures/facts/<section>/<case>.json, pyinfra's shape)."""

from __future__ import annotations

import json

import pytest
from facttools import ENVELOPE, FACTS, cases, probe_output, section_fixtures

from preflight.collect.parse import SECTIONS, parse_probe_output, parse_section
from preflight.model.facts import SectionError
from preflight.report.jsonreport import jsonable


@pytest.mark.parametrize("path", section_fixtures(),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_section_parses_to_its_recorded_fact(path):
    fixture = json.loads(path.read_text())
    fact = parse_section(path.parent.name, fixture["output"])
    if path.stem.startswith("invalid-"):  # a broken section is that section's error
        assert isinstance(fact, SectionError), fact
    else:
        assert not isinstance(fact, SectionError) or "error" in fixture["output"], fact
    assert jsonable(fact) == fixture["fact"]


def test_every_section_keeps_its_broken_cases():
    have = {p.parent.name for p in section_fixtures() if p.stem.startswith("invalid-")}
    assert set(SECTIONS) | {"clock", "container"} <= have, sorted(have)


def test_every_case_has_every_section_and_parses_whole():
    assert cases(), f"no fixtures in {FACTS / ENVELOPE}"
    for case in cases():
        have = {p.parent.name for p in FACTS.glob(f"*/{case}.json")} - {ENVELOPE}
        assert set(SECTIONS) | {"clock"} <= have, (case, sorted(have))
        facts = parse_probe_output(probe_output(case))
        assert facts.schema == 1
        assert not any(isinstance(getattr(facts, s), SectionError) for s in SECTIONS), case
