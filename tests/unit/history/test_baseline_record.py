"""Host profiles, and the baseline section written and read back (one-line errors)."""

from __future__ import annotations

import json

import pytest
from support import AUDIT_NOW, cluster, good_cluster

from preflight.common import profile
from preflight.common.plain import jsonable
from preflight.config.errors import InputError
from preflight.history import baseline as B
from preflight.model.facts import SectionError
from preflight.report.jsonreport import typed


def test_profile_is_what_must_match():
    facts = cluster(a={}).outcomes[0].facts
    assert facts is not None
    p = profile.of_host(facts, "10.0.0.1")
    assert (p.gpu_count, p.gpu_model, p.driver, p.paddle, p.cuda, p.python, p.mtu,
            p.nic_speed_mbps) == (8, "NVIDIA H100 80GB HBM3", "550.54.15", "3.3.1", "12.4",
                                  "3.11", 1500, 10000)
    facts = cluster(a={"gpu": SectionError("nvml: boom")}).outcomes[0].facts
    assert facts is not None
    broken = profile.of_host(facts, "10.0.0.1")
    assert broken.unknown == ("gpu: nvml: boom",) and broken.gpu_model is None


BAD_BASELINES = [
    ("not-a-baseline", {}, "field 'baseline': not a baseline"),
    ("version", {"baseline_version": 9}, "field 'baseline.baseline_version'"),
    ("taken-at", {"taken_at": "yesterday"},
     "field 'baseline.taken_at': not a report preflight can read: expected a number"),
    ("profiles-empty", {"profiles": {}}, "field 'baseline.profiles'"),
    ("profile-field", {"profiles": {"n1": {"paddle": ["3"]}}},
     "field 'baseline.profiles.n1.paddle': not a report preflight can read: expected a string"),
    ("profile-unknown-key", {"profiles": {"n1": {"colour": "red"}}}, "unknown field 'colour'"),
    ("link", {"link_bps": -1}, "field 'baseline.link_bps'"),
]


@pytest.mark.parametrize("patch,fragment", [c[1:] for c in BAD_BASELINES],
                         ids=[c[0] for c in BAD_BASELINES])
def test_malformed_baseline_is_one_input_error(patch, fragment):
    c = good_cluster()
    sec = jsonable(B.section(profile.of_hosts(c.outcomes), c.network, AUDIT_NOW, None))
    doc = {"baseline": None if not patch else dict(sec, **patch)}
    with pytest.raises(InputError) as e:
        B.from_document("b.json", typed(json.loads(json.dumps(doc)), "b.json"))
    assert str(e.value).startswith("b.json: ") and fragment in str(e.value)
