"""Policy files and flags: what loads, and one-line errors for what does not."""

from __future__ import annotations

import pytest
from conftest import SHARED_CPU

from preflight.config.errors import InputError
from preflight.config.policy import build, load_policy, parse_ports
from preflight.model.policy import JobShape, PsModel


def test_policy_file_and_flags(tmp_path):
    p = tmp_path / "policy.yaml"
    p.write_text("mode: ps\nrequire: ['paddle>=2.6,<3']\nfiles: [/job/train.py]\n"
                 "ports: [6070-6071, 6767]\nlimits: {clock_skew_fail_s: 2}\n")
    pol = build(str(p), None, ["driver>=535"], ["/job/cfg.yaml"], None)
    assert pol.mode == "ps"
    assert [str(x) for x in pol.pins] == ["paddle<3,>=2.6", "driver>=535"]
    assert pol.files == ("/job/train.py", "/job/cfg.yaml")
    assert pol.ports == (6070, 6071, 6767)
    assert pol.limits.clock_skew_fail_s == 2 and pol.limits.clock_skew_warn_s == 1.0
    assert build(None, None, [], [], None).ports is None  # the plan picks free ports


def test_the_ps_mode_from_file_and_flag(tmp_path):
    p = tmp_path / "policy.yaml"
    p.write_text("mode: ps\nps_mode: geo\n")
    assert build(str(p), None, [], [], None).ps_mode == "geo"
    assert build(str(p), None, [], [], None, ps_mode="async").ps_mode == "async"
    assert build(None, None, [], [], None).ps_mode == "async"
    p.write_text("mode: ps\nps_mode: sync\n")
    with pytest.raises(InputError) as err:
        load_policy(str(p))
    assert "policy.yaml:2: " in str(err.value)
    assert "'sync' is not a PS mode preflight runs (async, geo): Paddle's CPU builds crash in " \
        "SendBarrierOp" in str(err.value)
    with pytest.raises(InputError, match="--ps-mode: field 'ps_mode'.*'fast' is not a PS mode"):
        build(None, None, [], [], None, ps_mode="fast")


def test_the_ps_rounds_model_is_sized_by_the_policy(tmp_path):
    p = tmp_path / "policy.yaml"
    p.write_text("mode: ps\nps_model: {dim: 256, batch: 128}\n")
    assert build(str(p), None, [], [], None).ps_model == PsModel(rows=100_000, dim=256,
                                                                   batch=128)
    p.write_text("mode: ps\nps_model: {dim: 0}\n")
    with pytest.raises(InputError, match="field 'ps_model.dim': 0 is not a count from 1 to 4096"):
        load_policy(str(p))
    p.write_text("mode: ps\nps_model: {width: 3}\n")
    with pytest.raises(InputError, match="width"):
        load_policy(str(p))


def test_job_shape_from_file_and_flags(tmp_path):
    p = tmp_path / "policy.yaml"
    p.write_text("mode: ps\nserver_num: 2\ntrainer_num: 4\n")
    pol = build(str(p), None, [], [], None, {"trainer_num": 6, "server_num": None})
    assert pol.job == JobShape(server_num=2, trainer_num=6) and pol.job.explicit
    assert not build(None, None, [], [], None, {"nproc_per_node": 2}).job.explicit
    with pytest.raises(InputError, match="field 'server_num'.*does not apply to mode collective"):
        build(None, "collective", [], [], None, {"server_num": 1})
    with pytest.raises(InputError, match="field 'nnodes'.*does not apply to mode ps"):
        build(None, "ps", [], [], None, {"nnodes": 2})


BAD = [
    ("unknown-key", "moed: ps\n", "field 'moed'"),
    ("bad-mode", "mode: async\n", "field 'mode'"),
    ("bad-pin", "require: ['paddle>>2']\n", "field 'require'"),
    ("unknown-pin-name", "require: ['torch>=2']\n", "'torch' is not something preflight pins"),
    # Cross-field: a warning on the wrong side of its failure, a share above 1, pins that
    # exclude each other.
    ("shm-inverted", "limits:\n  shm_warn_mib: 10\n  shm_fail_mib: 100\n",
     ":2: field 'limits.shm_warn_mib': shm_warn_mib 10 is below shm_fail_mib 100"),
    ("nofile-below-default", "limits: {nofile_warn: 2000}\n",
     "nofile_warn 2000 is below nofile_fail 4096"),
    ("clock-inverted", "limits: {clock_skew_fail_s: 0.5}\n",
     "field 'limits.clock_skew_fail_s': clock_skew_warn_s 1 is above clock_skew_fail_s 0.5"),
    ("link-ratio-above-1", "limits: {link_warn_ratio: 1.5}\n",
     "field 'limits.link_warn_ratio': 1.5 is not a share from above 0 to 1"),
    ("ratio-zero", "limits: {link_fail_ratio: 0}\n", "field 'limits.link_fail_ratio'"),
    ("busy-zero", "limits: {cpu_busy_ratio: 0}\n", "field 'limits.cpu_busy_ratio'"),
    ("loss-pct", "limits: {link_loss_warn_pct: 150}\n", "is not a percentage"),
    ("contradictory-pins", "mode: ps\nrequire: ['paddle>=3', 'paddle<2']\n",
     ":2: field 'require': paddle>=3 and paddle<2: no paddle version satisfies them"),
    ("bad-port", "ports: [70000]\n", "field 'ports'"),
    ("bad-limit", "limits: {shm_fail_mib: -1}\n", "field 'limits.shm_fail_mib'"),
    # NaN compares false with every bar: a NaN limit would switch its check off.
    ("nan-limit", "limits: {shm_fail_mib: .nan}\n",
     "field 'limits.shm_fail_mib': expected a finite number >= 0, got nan"),
    ("inf-limit", "limits: {link_min_gbps: .inf}\n",
     "field 'limits.link_min_gbps': expected a finite number >= 0, got inf"),
    ("unknown-limit", "limits: {foo: 1}\n", "field 'limits.foo'"),
    ("yaml", "require: [\n", "invalid YAML"),
    ("bad-size", "nnodes: 0\n", "field 'nnodes'"),
    ("size-type", "mode: ps\nserver_num: two\n", "field 'server_num'"),
]


@pytest.mark.parametrize("text,fragment", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_policy_file(tmp_path, text, fragment):
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        load_policy(str(p))
    assert str(err.value).startswith(str(p)) and fragment in str(err.value)
    assert "\n" not in str(err.value)


PLAIN = [  # a bad pin, said in plain words rather than the packaging library's grammar
    ("paddle>=3..1", "'3..1' is not a version number"),
    ("paddle=3", "'=3' does not start with a comparison: ==, !=, >=, <=, >, < or ~= (== for "
                 "equal)"),
    ("paddle", "pins nothing: add a comparison"),
    ("paddle~=3", "~= needs two parts or more"),
    ("paddle>=3.*", "a wildcard (3.*) goes only with == or !="),
    ("paddle>=3;os_name=='nt'", "is not a version number"),
]


@pytest.mark.parametrize("pin,words", PLAIN, ids=[p[0] for p in PLAIN])
def test_a_bad_pin_is_said_in_plain_words(pin, words):
    with pytest.raises(InputError) as err:
        build(None, None, [pin], [], None)
    assert str(err.value) == f"--require: field 'require': {pin!r}: " + \
        str(err.value).split(f"{pin!r}: ", 1)[1]
    assert words in str(err.value) and "Expected" not in str(err.value)


@pytest.mark.parametrize("pins", [["paddle>3.1,<3.1.1"], ["paddle>=2.6", "paddle<3"],
                                  ["cuda>=12.0, <13"], ["driver!=550.54.15", "driver>=550"],
                                  ["paddle==3.*", "paddle!=3.0.0"]])
def test_pins_that_a_version_can_satisfy_are_not_contradictions(pins):
    assert build(None, None, pins, [], None).pins


def test_the_rig_s_shared_cpu_limits_are_a_valid_policy(tmp_path):
    # An oversubscribed host is a load ratio above 1: not a share, and not refused.
    p = tmp_path / "policy.yaml"
    p.write_text(SHARED_CPU)  # what the cluster tests' policies end with
    assert load_policy(str(p)).limits.cpu_busy_ratio == 100


def test_bad_flags():
    with pytest.raises(InputError, match="--require: field 'require'"):
        build(None, None, ["paddle=>3"], [], None)
    with pytest.raises(InputError, match="--ports"):
        parse_ports("6070-6000", "--ports")
    with pytest.raises(InputError, match="not a usable path"):
        build(None, None, [], ["-rf"], None)


def test_policy_refuses_a_repeated_key_and_says_where(tmp_path):
    p = tmp_path / "policy.yaml"
    p.write_text("mode: collective\nlimits: {shm_fail_mib: 1}\nmode: ps\n")
    with pytest.raises(InputError) as err:
        load_policy(str(p))
    assert str(err.value) == f"{p}:3: invalid YAML: duplicate key 'mode' (first on line 1)"


@pytest.mark.parametrize("text,where", [
    ("files: [a]\nmode: async\n", ":2: field 'mode'"),
    ("mode: ps\nlimits:\n  shm_fail_mib: 1\n  bogus: 2\n", ":4: field 'limits.bogus'"),
    ("require:\n  - paddle>=2.6\n  - torch\n", ":1: field 'require'"),
    ("nnodes: 2\nports: [1-2-3]\n", ":2: field 'ports'"),
])
def test_policy_errors_name_the_line(tmp_path, text, where):
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        load_policy(str(p))
    assert str(err.value).startswith(f"{p}{where}")
