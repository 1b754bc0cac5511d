"""The paddle-stack check: Paddle importable, and its stack identical on every host."""

from __future__ import annotations

import pytest
from support import cluster, messages, paddle, same

from preflight.checks import paddle_stack
from preflight.model.facts import SectionError
from preflight.model.findings import Status

PADDLE_CASES = [
    ("alike", same(3), []),
    ("version", {**same(5), "node07": {"paddle": paddle("3.2.2")}},
     ["node07: paddle 3.2.2 != 3.3.1 (5 of 6 hosts)"]),
    ("same-version-other-build", {**same(2), "node03": {"paddle": paddle(commit="deadbeef")}},
     ["node03: paddle commit deadbeef != c0ffee3.3.1 (2 of 3 hosts)"]),
    ("cpu-builds-report-no-nccl-differently", {
        "a": {"paddle": paddle(compiled_with_cuda=False, nccl="0", cuda="False")},
        "b": {"paddle": paddle(compiled_with_cuda=False, nccl=None, cuda="False")}}, []),
    ("nccl", {**same(2), "node03": {"paddle": paddle(nccl="21000")}},
     ["node03: NCCL 21000 != 22501 (2 of 3 hosts)"]),
    ("cudnn-missing-field", {**same(2), "node03": {"paddle": paddle(cudnn=None)}},
     ["node03: cuDNN none != 9.5.1 (2 of 3 hosts)"]),
    ("python-minor", {**same(2), "node03": {"paddle": paddle(python="3.10.12")}},
     ["node03: Python 3.10 != 3.11 (2 of 3 hosts)"]),
    ("not-importable", {**same(2), "node03": {"paddle": paddle(
        available=False, reason="ModuleNotFoundError: No module named 'paddle'")}},
     ["node03: Paddle not importable with /opt/paddle/bin/python: ModuleNotFoundError: "
      "No module named 'paddle'"]),
]


@pytest.mark.parametrize("hosts,fails", [c[1:] for c in PADDLE_CASES],
                         ids=[c[0] for c in PADDLE_CASES])
def test_paddle_stack(hosts, fails):
    fs = list(paddle_stack.check(cluster(**hosts)))
    assert messages(fs, Status.FAIL) == fails
    failing = {h for f in fs if f.status is Status.FAIL for h in f.hosts}
    passing = {h for f in fs if f.status is Status.PASS for h in f.hosts}
    assert not failing & passing
    if not fails:
        assert passing == set(hosts)


def test_paddle_section_error_is_could_not_check():
    fs = list(paddle_stack.check(cluster(
        a={}, b={"paddle": SectionError("python3 did not finish importing paddle within 57 s")})))
    assert messages(fs, Status.COULD_NOT_CHECK) == [
        "b: could not read Paddle facts: python3 did not finish importing paddle within 57 s"]


def test_the_loaded_nccl_is_compared_not_only_the_one_paddle_was_built_with():
    # 3.x reports the NCCL it was built with, a constant of the wheel; the library that runs
    # comes from the nvidia-nccl-cu* wheel and may differ by host.
    c = cluster(a={"paddle": paddle(nccl_runtime="22103")},
                b={"paddle": paddle(nccl_runtime="22103")},
                c={"paddle": paddle(nccl_runtime="21803")})
    msgs = [f.message for f in paddle_stack.check(c) if f.status is Status.FAIL]
    assert msgs == ["c: NCCL (loaded) 21803 != 22103 (2 of 3 hosts)"]
