"""Probe output -> HostFacts: golden outputs from real hosts, and broken output kept too."""

from __future__ import annotations

import json

import pytest
from facttools import probe_output

from preflight.collect.parse import ProbeOutputError, parse_probe_output
from preflight.common.remote import MAX_OUTPUT
from preflight.model.facts import CpuFacts, PaddleFacts, SectionError


def golden(case: str) -> str:
    """A real probe's whole output (tests/fixtures/facts, put back together)."""
    return probe_output(case)


def test_golden_paddle_331():
    facts = parse_probe_output(golden("paddle-3.3.1-cpu"), received_at=0)
    assert isinstance(facts.paddle, PaddleFacts)
    assert facts.paddle.version == "3.3.1" and facts.paddle.ps_core is False
    assert facts.paddle.compiled_with_cuda is False and facts.paddle.cuda_archs == ()
    assert facts.paddle.nccl == "0"
    # Each simulated host is a cgroup of its own, quota all the machine's cores: the job's
    # CPU is counted there, net of the probe's own Paddle import.
    assert isinstance(facts.cpu, CpuFacts) and facts.cpu.quota is not None
    assert facts.cpu.effective == facts.cpu.logical == 2
    assert facts.cpu.other_work is not None and facts.cpu.other_work.busy_cores < 0.25
    assert facts.cpu.other_work.scope.startswith("cgroup v1 ")
    assert not isinstance(facts.network, SectionError)
    assert {i.name for i in facts.network.interfaces} == {"eth0", "lo"}  # its own sysfs


def test_golden_paddle_262_lacks_new_fields():
    facts = parse_probe_output(golden("paddle-2.6.2-cpu"))
    assert isinstance(facts.paddle, PaddleFacts)
    assert facts.paddle.version == "2.6.2" and facts.paddle.ps_core is True
    assert facts.paddle.nccl is None and facts.paddle.cuda_archs is None


def test_golden_cgroup_quota():
    facts = parse_probe_output(golden("cgroup-v1-half-core"))
    assert isinstance(facts.cpu, CpuFacts) and facts.cpu.quota is not None
    assert facts.cpu.effective == 0.5 and facts.cpu.logical == 2
    assert (facts.cpu.quota.quota_us, facts.cpu.quota.period_us) == (50000, 100000)


def test_golden_busy_cgroup_counts_the_other_work_not_the_load_average():
    # A process spinning on one core in the host's cgroup, started just before the probe:
    # the sample sees the whole core; the 1-minute load average has not caught up.
    facts = parse_probe_output(golden("cgroup-v1-busy"))
    assert isinstance(facts.cpu, CpuFacts) and facts.cpu.other_work is not None
    assert facts.cpu.other_work.busy_cores == pytest.approx(1.0, abs=0.1)
    assert facts.cpu.loadavg[0] < 0.9
    assert facts.cpu.free_cores == pytest.approx(1.0, abs=0.1)
    assert facts.cpu.threads_per_core == 1 and facts.cpu.smt_active is False


def test_golden_no_paddle():
    facts = parse_probe_output(golden("no-paddle"))
    assert isinstance(facts.paddle, PaddleFacts) and not facts.paddle.available
    assert "No module named 'paddle'" in (facts.paddle.reason or "")


def test_clock_skew_is_host_minus_arrival():
    doc = json.loads(golden("paddle-3.3.1-cpu"))
    facts = parse_probe_output(json.dumps(doc), received_at=doc["clock"]["epoch"] - 2.5)
    assert not isinstance(facts.clock, SectionError)
    assert facts.clock.skew_s == pytest.approx(2.5)


def mutate(**changes):
    doc = json.loads(golden("paddle-3.3.1-cpu"))
    doc.update(changes)
    return json.dumps(doc)


WHOLE_BROKEN = [
    ("empty", "", "printed nothing"),
    ("garbage", "Segmentation fault\n", "not valid JSON"),
    ("truncated", golden("paddle-3.3.1-cpu")[:300], "not valid JSON"),
    ("list", "[1, 2]", "not a JSON object"),
    ("no-schema", json.dumps({"cpu": {}}), "no schema"),
    ("future-schema", mutate(schema=2), "schema 2"),
    ("bool-schema", mutate(schema=True), "no schema"),
    ("huge", "x" * (MAX_OUTPUT + 1), "over the limit"),
]


@pytest.mark.parametrize("raw,fragment", [(r, f) for _, r, f in WHOLE_BROKEN],
                         ids=[i for i, _, _ in WHOLE_BROKEN])
def test_unusable_output_raises_with_reason(raw, fragment):
    with pytest.raises(ProbeOutputError, match=fragment):
        parse_probe_output(raw)


SECTION_BROKEN = [
    ("error-object", "gpu", {"error": "RuntimeError: NVML driver mismatch"},
     "NVML driver mismatch"),
    ("missing", "cpu", None, "missing"),
    ("wrong-type", "cpu", {"logical": "two", "affinity": 2, "effective": 2, "utilization": 0},
     "logical: expected an integer"),
    ("not-object", "memory", [1], "expected an object"),
    ("nan", "cpu", {"logical": 2, "affinity": 2, "effective": float("nan"), "utilization": 0},
     "effective: expected a number"),
    ("port-range", "ports", {"tcp": [22, 70000]}, "0-65535"),
    ("too-many", "network", {"interfaces": [{"name": "x"}] * 5000}, "limit"),
    ("unknown-gpu-source", "gpu", {"source": "rocm"}, "unknown GPU source"),
]


@pytest.mark.parametrize("section,value,fragment", [(s, v, f) for _, s, v, f in SECTION_BROKEN],
                         ids=[i for i, _, _, _ in SECTION_BROKEN])
def test_broken_section_is_an_error_not_a_crash(section, value, fragment):
    doc = json.loads(golden("paddle-3.3.1-cpu"))
    if value is None:
        del doc[section]
    else:
        doc[section] = value
    facts = parse_probe_output(json.dumps(doc))
    broken = getattr(facts, section)
    assert isinstance(broken, SectionError)
    assert fragment in broken.message
    assert isinstance(facts.paddle, PaddleFacts)  # the other sections still parse


def test_long_strings_are_cut():
    doc = json.loads(golden("paddle-3.3.1-cpu"))
    doc["system"]["hostname"] = "é" * 100_000
    facts = parse_probe_output(json.dumps(doc))
    assert not isinstance(facts.system, SectionError)
    assert len(facts.system.hostname) == 4096
