"""The pins check: the policy's version pins, and NCCL version codes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import cluster, gpu, messages, paddle, same

from preflight.checks import pins
from preflight.checks.pins import nccl_version
from preflight.model import facts as F
from preflight.model.findings import Status
from preflight.model.policy import Pin, Policy

PIN_CASES = [
    ("paddle-ok", Pin("paddle", ">=2.6,<4"), {}, None),
    ("paddle-fails", Pin("paddle", ">=3.3"), {"paddle": paddle("3.2.2")},
     "a: paddle 3.2.2 does not satisfy paddle>=3.3"),
    ("driver", Pin("driver", ">=560"), {}, "a: driver 550.54.15 does not satisfy driver>=560"),
    ("nccl-code", Pin("nccl", ">=2.25"), {"paddle": paddle(nccl="2804")},
     "a: nccl 2.8.4 does not satisfy nccl>=2.25"),
    ("python", Pin("python", ">=3.12"), {}, "a: python 3.11.2 does not satisfy python>=3.12"),
]


@pytest.mark.parametrize("pin,spec,fail", [c[1:] for c in PIN_CASES], ids=[c[0] for c in PIN_CASES])
def test_pins(pin, spec, fail):
    fs = list(pins.check(replace(cluster(a=spec), policy=Policy(pins=(pin,)))))
    assert messages(fs, Status.FAIL) == ([fail] if fail else [])


def test_pin_without_a_value_is_could_not_check():
    c = replace(cluster(**same(1, gpu=gpu(n=0), paddle=paddle(compiled_with_cuda=False))),
                policy=Policy(pins=(Pin("driver", ">=535"), Pin("cuda", ">=12"))))
    assert messages(pins.check(c), Status.COULD_NOT_CHECK) == [
        "node01: no driver version to hold to driver>=535",
        "node01: no cuda version to hold to cuda>=12"]


@pytest.mark.parametrize("code,version", [("22501", "2.25.1"), ("2804", "2.8.4"),
                                          ("21000", "2.10.0"), ("0", None), ("2.19.3", "2.19.3")])
def test_nccl_version_codes(code, version):
    assert nccl_version(code) == version


def test_a_paddle_pin_under_no_paddle_is_not_requested_the_driver_pin_still_holds():
    unasked = F.SectionError(F.PADDLE_NOT_REQUESTED)
    c = replace(cluster(a={"paddle": unasked}),
                policy=Policy(pins=(Pin("paddle", ">=3"), Pin("driver", ">=560"))))
    found = list(pins.check(c))
    assert messages(found, Status.SKIP) == ["a: paddle>=3 not requested (--no-paddle)"]
    assert messages(found, Status.FAIL) == ["a: driver 550.54.15 does not satisfy driver>=560"]


def test_an_nccl_or_cudnn_pin_holds_the_loaded_library_where_the_probe_read_it():
    c = replace(cluster(a={"paddle": paddle(nccl="22501", nccl_runtime="21803",
                                            cudnn_runtime="8906")}),
                policy=Policy(pins=(Pin("nccl", ">=2.20"), Pin("cudnn", ">=9"))))
    assert messages(pins.check(c), Status.FAIL) == [
        "a: nccl 2.18.3 does not satisfy nccl>=2.20", "a: cudnn 8.9.6 does not satisfy cudnn>=9"]
