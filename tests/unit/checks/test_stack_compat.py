"""The stack-compat check: driver, CUDA build and GPU architectures fit together."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import cluster, gpu, messages, paddle

from preflight.checks import stack_compat
from preflight.model.findings import Status
from preflight.model.policy import Policy

COMPAT_CASES = [
    ("fits", {}, "collective", [], []),
    ("old-driver", {"gpu": gpu(driver="515.65.01")}, "collective",
     ["driver 515.65.01 is too old for Paddle's CUDA 12.4 (needs >= 525.60.13)"], []),
    ("mvc-only", {"gpu": gpu(driver="535.104.05")}, "collective", [],
     ["driver 535.104.05 runs CUDA 12.4 only through minor-version compatibility"]),
    ("arch-not-covered", {"paddle": paddle(cuda_archs=(80,))}, "collective", [],
     ["compute capability 9.0 is not covered by Paddle's cuda_archs [80]"]),
    ("arch-older-minor-ok", {"gpu": gpu(cc="8.6"), "paddle": paddle(cuda_archs=(80,))},
     "collective", [], []),
    ("archs-unreported", {"paddle": paddle(cuda_archs=None, version="2.6.2")}, "collective", [],
     ["Paddle 2.6.2 does not report cuda_archs"]),
    ("cpu-build-on-gpu", {"paddle": paddle(compiled_with_cuda=False)}, "collective",
     ["a CPU build of Paddle (3.3.1) on a host with 8 GPUs"], []),
    ("ps-without-core", {"gpu": gpu(n=0), "paddle": paddle(ps_core=False)}, "ps",
     ["lacks the parameter-server core"], []),
    ("ps-with-core", {"gpu": gpu(n=0), "paddle": paddle(ps_core=True)}, "ps", [], []),
    # protobuf 7 dropped FieldDescriptor.label: Paddle's fleet cannot set a_sync (seen with
    # 2.6.2 and protobuf 7.36.2; 5.29 and 6.33 ran the PS round).
    ("ps-protobuf-7", {"gpu": gpu(n=0), "paddle": paddle(ps_core=True, protobuf="7.36.2")},
     "ps", ["protobuf 7.36.2 beside Paddle 3.3.1: protobuf 7 removed FieldDescriptor.label"],
     []),
    ("ps-protobuf-6", {"gpu": gpu(n=0), "paddle": paddle(ps_core=True, protobuf="6.33.6")},
     "ps", [], []),
    ("collective-protobuf-7", {"paddle": paddle(protobuf="7.36.2")}, "collective", [], []),
]


@pytest.mark.parametrize("spec,mode,fails,warns", [c[1:] for c in COMPAT_CASES],
                         ids=[c[0] for c in COMPAT_CASES])
def test_stack_compat(spec, mode, fails, warns):
    c = replace(cluster(a=spec), policy=Policy(mode=mode))
    fs = list(stack_compat.check(c))
    assert len(messages(fs, Status.FAIL)) == len(fails)
    assert len(messages(fs, Status.WARN)) == len(warns)
    for got, want in zip(messages(fs, Status.FAIL) + messages(fs, Status.WARN), fails + warns):
        assert got.startswith("a: ") and want in got
    assert any(f.status is Status.PASS for f in fs) == (not fails and not warns)


def test_driver_table_edges():
    assert list(stack_compat.driver_findings("11.8", "520.61.05")) == []
    assert list(stack_compat.driver_findings("12.4", "550.54.14")) == []
    assert [s for s, _ in stack_compat.driver_findings("13.0", "575.57.08")] == [Status.FAIL]
    assert [s for s, _ in stack_compat.driver_findings("10.2", "440.33")] == []
    assert [s for s, _ in stack_compat.driver_findings("9.2", "396.26")] == [Status.WARN]
    assert [s for s, _ in stack_compat.driver_findings("12.6", "garbage")] == [
        Status.COULD_NOT_CHECK]


def test_the_2_6_gpu_wheel_on_hopper_fails_though_it_reports_no_archs():
    # 2.6 has no cuda_archs(); its PyPI GPU wheel (CUDA 11.8) carries sm_61..86 and no PTX.
    p26 = paddle("2.6.2", cuda="11.8", cudnn="8.6.0", cuda_archs=None)
    hopper = cluster(h={"paddle": p26, "gpu": gpu(n=8, cc="9.0", driver="550.54.15")})
    fails = messages(stack_compat.check(hopper), Status.FAIL)
    assert fails == ["h: compute capability 9.0 is not among the architectures the Paddle "
                     "2.6.2 wheel for CUDA 11.8 carries (sm_61/sm_70/sm_75/sm_80/sm_86) and it "
                     "has no PTX: every kernel fails (\"no kernel image is available\"); "
                     "install a CUDA 12 build for this GPU"]
    ampere = cluster(a={"paddle": p26, "gpu": gpu(n=8, name="NVIDIA A100-SXM4-80GB", cc="8.0",
                                                  driver="550.54.15")})
    assert messages(stack_compat.check(ampere), Status.FAIL) == []
    # A build preflight knows nothing of still only warns.
    other = cluster(o={"paddle": paddle("2.5.2", cuda="12.0", cuda_archs=None),
                       "gpu": gpu(n=1, cc="9.0")})
    assert [s for s, _ in [(f.status, f.message) for f in stack_compat.check(other)]
            if s is not Status.PASS] == [Status.WARN]
