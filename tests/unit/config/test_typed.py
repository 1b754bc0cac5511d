"""The one reader of documents into typed values: what was written reads back equal, older
and newer documents read, and a value of the wrong kind is one line naming its field."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from facttools import probe_output
from support import good_cluster, host_facts, outcome, report_doc

from preflight.collect.parse import parse_probe_output
from preflight.config.errors import InputError
from preflight.config.typed import decode
from preflight.judge import judge, run_checks
from preflight.model import facts as F
from preflight.model.measure import AllReduce, LinkRun, NetworkTests
from preflight.model.report import Report
from preflight.placement.planner import plan as make_plan
from preflight.report.jsonreport import jsonable


@pytest.mark.parametrize("case", ["paddle-3.3.1-cpu", "paddle-2.6.2-cpu", "no-paddle",
                                  "cgroup-v1-busy"])
def test_real_facts_read_back_equal(case):
    facts = parse_probe_output(probe_output(case), received_at=1.0)
    written = json.loads(json.dumps(jsonable(facts)))
    assert decode(F.HostFacts, written, "r.json") == facts


def test_a_failed_section_reads_back_as_the_error_it_was():
    facts = host_facts(gpu=F.SectionError("NVML: GPU is lost"))
    got = decode(F.HostFacts, json.loads(json.dumps(jsonable(facts))), "r.json")
    assert got.gpu == F.SectionError("NVML: GPU is lost") and got == facts


def test_older_documents_take_defaults_and_newer_keys_are_left_alone():
    net = {"schedule": "ring", "links": [{"sender": "a", "receiver": "b", "phase": "survey",
                                          "result": {"received_bps": 9.0e8}, "new": 1}],
           "from_a_later_release": {"x": 1}}
    got = decode(NetworkTests, net, "r.json")
    assert got.links[0].bps == 9.0e8 and got.allreduce is None and got.rounds == 0
    assert isinstance(got.links[0], LinkRun)


@pytest.mark.parametrize("doc, field, words", [
    ({"schedule": "mesh"}, "schedule", "'mesh' is not one of ring, matrix"),
    ({"schedule": "ring", "links": [{"sender": "a", "receiver": 3, "phase": "survey",
                                     "result": {}}]},
     "links[0].receiver", "expected a string, got a whole number 3"),
    ({"schedule": "ring", "links": [{"sender": "a", "phase": "survey", "result": {}}]},
     "links[0].receiver", "missing"),
    ({"schedule": "ring", "allreduce": {"backend": "gloo", "hosts": ["a"], "ranks": "two"}},
     "allreduce.ranks", "expected a whole number, got a string 'two'"),
    ({"schedule": "ring", "hosts": "a,b"}, "hosts", "expected a list, got a string 'a,b'"),
    ({"schedule": "ring", "interrupted": 1}, "interrupted", "expected true or false"),
], ids=["literal", "type-in-list", "missing", "nested", "list", "bool"])
def test_a_value_of_the_wrong_kind_is_one_line_naming_its_field(doc, field, words):
    with pytest.raises(InputError) as e:
        decode(NetworkTests, doc, "r.json")
    text = str(e.value)
    assert f"field '{field}'" in text and words in text and "\n" not in text, text
    assert text.startswith("r.json")


def test_an_int_is_a_number_and_a_bool_is_not():
    ar = decode(AllReduce, {"backend": "nccl", "hosts": [], "ranks": 8, "wall_s": 3}, "r")
    assert ar.wall_s == 3.0 and isinstance(ar.wall_s, float)
    with pytest.raises(InputError, match="field 'ranks'"):
        decode(AllReduce, {"backend": "nccl", "hosts": [], "ranks": True}, "r")


def test_a_whole_report_reads_back_as_written():
    c = replace(good_cluster(), outcomes=(
        *good_cluster().outcomes[:3],
        outcome("node04", host_facts(gpu=F.SectionError("NVML: lost"),
                                     env=F.EnvFacts((("NCCL_DEBUG", "WARN"),))))))
    findings = run_checks(c)
    plan = make_plan(c, findings, {o.host.name: f"10.0.0.{i}"
                                   for i, o in enumerate(c.outcomes, 1)})
    doc = report_doc(c, judge(c, findings, plan), plan, command="check", fail_on="fail")
    report = decode(Report, doc, "r.json")
    assert report.verdict is not None and report.verdict.value == doc["verdict"]
    n4 = report.hosts["node04"].facts
    assert n4 is not None and n4.gpu == F.SectionError("NVML: lost")
    assert n4.env == F.EnvFacts((("NCCL_DEBUG", "WARN"),))  # written as a mapping
    assert [(f.check, f.status.value, list(f.hosts)) for f in report.findings] == [
        (f["check"], f["status"], f["hosts"]) for f in doc["findings"]]
    assert c.network is not None and report.network is not None
    assert len(report.network.links) == len(c.network.links)
    assert report.plan is not None and [n.host for n in report.plan.nodes] == [
        n["host"] for n in doc["plan"]["nodes"]]
