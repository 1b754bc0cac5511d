"""Bad input of any shape (generated): inventories, policies and probe output load or say one
line naming the file, host and field; never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.collect.parse import ProbeOutputError, parse_probe_output
from preflight.config.errors import InputError
from preflight.config.policy import load_policy
from preflight.inventory import load

FIELDS = ["address", "user", "port", "identity_file", "known_hosts", "python", "probe_python",
          "roles"]


# YAML values of every type, nested a little; strings with what shells and YAML choke on.
TEXT = st.text(alphabet=st.sampled_from(list("ab-_.:/ $`'\"\\;|&*?~!#{}[]\n\t\x00é😀")),
               max_size=30)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                    st.floats(allow_nan=True), TEXT)


VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)


CERTAINLY_BAD = {
    "port": st.one_of(st.integers(max_value=0), st.integers(min_value=65536), TEXT,
                      st.booleans(), st.lists(st.integers(), min_size=1)),
    "address": st.one_of(st.just(""), st.text(alphabet=" \n\t;$`|&'\"", min_size=1),
                         st.integers(), st.lists(TEXT, min_size=1)),
    "roles": st.one_of(st.lists(st.sampled_from(["boss", "", "Worker"]), min_size=1),
                       st.integers()),
}


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def good_inventory() -> dict[str, Any]:
    return {"defaults": {"user": "root", "port": 22, "python": "python3"},
            "hosts": {"node01": {"address": "10.0.0.1"}, "node02": {"address": "10.0.0.2"}}}


def write(tmp_path, name: str, doc: Any) -> str:
    path = str(tmp_path / name)
    with open(path, "w") as fh:
        if isinstance(doc, str):
            fh.write(doc)
        else:
            yaml.safe_dump(doc, fh, allow_unicode=True)
    return path


def one_line(e: InputError, path: str) -> str:
    text = str(e)
    assert "\n" not in text and text.startswith(path), text
    return text


@SETTINGS
@given(host=st.sampled_from(["node01", "node02"]), field=st.sampled_from(FIELDS), value=VALUES)
def test_a_bad_host_field_is_named(tmp_path, host, field, value):
    doc = good_inventory()
    doc["hosts"][host][field] = value
    path = write(tmp_path, "inv.yaml", doc)
    try:
        hosts = load(path)
    except InputError as e:
        text = one_line(e, path)
        if e.host is not None:  # an error about a host names the one we broke
            assert (e.host, e.field) == (host, field), text
            assert f"host {host!r}" in text and f"field {field!r}" in text
    else:
        assert [h.name for h in hosts] == ["node01", "node02"]


@SETTINGS
@given(field=st.sampled_from(sorted(CERTAINLY_BAD)), data=st.data())
def test_certainly_bad_values_are_refused(tmp_path, field, data):
    doc = good_inventory()
    doc["hosts"]["node02"][field] = data.draw(CERTAINLY_BAD[field])
    path = write(tmp_path, "inv.yaml", doc)
    with pytest.raises(InputError) as e:
        load(path)
    text = one_line(e.value, path)
    assert "host 'node02'" in text and f"field {field!r}" in text


@SETTINGS
@given(doc=st.one_of(VALUES, st.dictionaries(st.sampled_from(["defaults", "hosts", "x"]),
                                              VALUES, max_size=3)))
def test_any_yaml_document_loads_or_is_one_line(tmp_path, doc):
    path = write(tmp_path, "inv.yaml", doc)
    try:
        load(path)
    except InputError as e:
        one_line(e, path)


@SETTINGS
@given(text=st.text(max_size=200))
def test_any_text_as_inventory_loads_or_is_one_line(tmp_path, text):
    path = write(tmp_path, "inv.yaml", text)
    try:
        load(path)
    except InputError as e:
        one_line(e, path)


POLICY_KEYS = ["mode", "require", "files", "ports", "limits", "nnodes", "nproc_per_node",
               "server_num", "trainer_num", "unknown"]


@SETTINGS
@given(doc=st.dictionaries(st.sampled_from(POLICY_KEYS), VALUES, max_size=4),
       limits=st.dictionaries(st.sampled_from(["shm_fail_mib", "link_warn_ratio",
                                               "clock_skew_warn_s", "bogus"]), VALUES,
                              max_size=2))
def test_policies_load_or_name_the_field(tmp_path, doc, limits):
    if limits:
        doc["limits"] = limits
    path = write(tmp_path, "policy.yaml", doc)
    try:
        load_policy(path)
    except InputError as e:
        text = one_line(e, path)
        if e.field is not None:
            assert e.field.split(".")[0] in doc or e.field in limits, text


def probe_doc() -> dict[str, Any]:
    return {"schema": 1, "system": {"hostname": "h", "kernel": "6", "arch": "x86_64",
                                    "os": "Linux", "python": "3.11.2"}}


@SETTINGS
@given(section=st.sampled_from(["system", "cpu", "memory", "shm", "tmp", "limits", "network",
                                "ports", "env", "files", "gpu", "paddle", "clock"]),
       value=VALUES)
def test_probe_sections_of_any_shape_become_section_errors(section, value):
    doc = dict(probe_doc(), **{section: value})
    facts = parse_probe_output(json.dumps(doc), received_at=1.0)  # never raises for a section
    assert facts.schema == 1


@pytest.mark.parametrize("raw, words", [
    ("", "printed nothing"),
    ("x" * (5 << 20), "over the limit"),
    ("[1, 2]", "not a JSON object"),
    ('{"schema": "1"}', "no schema number"),
    ('{"schema": true}', "no schema number"),
    ('{"schema": 2}', "schema 2"),
    ('{"schema": 1, "system": ', "not valid JSON"),
])
def test_unusable_probe_documents_are_named(raw, words):
    with pytest.raises(ProbeOutputError, match=words):
        parse_probe_output(raw)


def test_huge_and_odd_fields_are_cut_to_size():
    doc = probe_doc()
    doc["system"]["hostname"] = "h" * 100_000 + "\u202e😀"
    doc["env"] = {"vars": {f"NCCL_{i}": "v" * 10_000 for i in range(50)}}
    facts = parse_probe_output(json.dumps(doc), received_at=1.0)
    assert len(facts.system.hostname) <= 4096  # type: ignore[union-attr]
