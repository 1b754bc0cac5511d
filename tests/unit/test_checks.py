"""The checks, table-driven over facts: pass, fail/warn, and could-not-check for each."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from support import REFUSED, cluster, cpu, gpu, paddle, same

from preflight.checks import ALL_CHECKS, paddle_stack, reachability
from preflight.checks import cpu as cpu_check
from preflight.checks import gpu as gpu_check
from preflight.facts import CpuQuota, SectionError
from preflight.model import Finding, Status


def statuses(findings: Iterable[Finding]) -> list[tuple[str, tuple[str, ...]]]:
    return sorted((f.status.value, f.hosts) for f in findings)


def messages(findings: Iterable[Finding], status: Status) -> list[str]:
    return [f.message for f in findings if f.status is status]


# ---------------------------------------------------------------- reachability
def test_reachable_all():
    fs = list(reachability.check(cluster(**same(3))))
    assert statuses(fs) == [("pass", ("node01", "node02", "node03"))]


def test_unreachable_host_is_could_not_check_with_stage():
    fs = list(reachability.check(cluster(node01={}, node02=REFUSED)))
    cnc = [f for f in fs if f.status is Status.COULD_NOT_CHECK]
    assert len(cnc) == 1 and cnc[0].hosts == ("node02",)
    assert cnc[0].message == ("node02: could not check (connect): connection refused at "
                              "10.0.0.9:22 (is sshd running?)")
    assert cnc[0].data["stage"] == "connect"


# ---------------------------------------------------------------- GPU
GPU_CASES = [
    ("alike", same(4, gpu=gpu()), [], None),
    ("cpu-cluster", same(3, gpu=gpu(n=0)), [], None),
    ("driver", {**same(5, gpu=gpu()), "node07": {"gpu": gpu(driver="550.90.07")}},
     ["node07: driver 550.90.07 != 550.54.15 (5 of 6 hosts)"], None),
    ("count", {**same(3, gpu=gpu()), "node09": {"gpu": gpu(n=4)}},
     ["node09: GPU count 4 != 8 (3 of 4 hosts)"], None),
    ("model-memory", {**same(2, gpu=gpu()),
                      "node05": {"gpu": gpu(name="NVIDIA A100-SXM4-80GB", mem=81920, cc="8.0")}},
     ["node05: GPU model NVIDIA A100-SXM4-80GB != NVIDIA H100 80GB HBM3 (2 of 3 hosts)",
      "node05: GPU memory (MiB) 81920 != 81559 (2 of 3 hosts)",
      "node05: compute capability 8.0 != 9.0 (2 of 3 hosts)"], None),
    ("no-gpu-among-gpus", {**same(2, gpu=gpu()), "node03": {"gpu": gpu(n=0)}},
     ["node03: GPU count 0 != 8 (2 of 3 hosts)"], None),
    ("tie", {"a": {"gpu": gpu()}, "b": {"gpu": gpu(driver="535.1")}},
     ["driver differs with no majority: 550.54.15 on a; 535.1 on b"], None),
    ("section-error", {**same(2), "node03": {"gpu": SectionError("NVML: driver mismatch")}},
     [], "node03: could not read GPU facts: NVML: driver mismatch"),
]


@pytest.mark.parametrize("hosts,fails,cnc", [c[1:] for c in GPU_CASES],
                         ids=[c[0] for c in GPU_CASES])
def test_gpu_homogeneity(hosts, fails, cnc):
    fs = list(gpu_check.check(cluster(**hosts)))
    assert messages(fs, Status.FAIL) == fails
    assert messages(fs, Status.COULD_NOT_CHECK) == ([cnc] if cnc else [])
    assert any(f.status is Status.PASS for f in fs) == (not fails)


def test_gpus_of_one_host_differ():
    from preflight import facts as F
    mixed = F.GpuFacts(source="nvml", driver="550", devices=(
        F.GpuDevice(0, "NVIDIA A100-SXM4-40GB", 40960, "8.0"),
        F.GpuDevice(1, "NVIDIA A100-SXM4-80GB", 81920, "8.0")))
    fs = list(gpu_check.check(cluster(a={"gpu": mixed}, b={"gpu": mixed})))
    assert "a: GPUs of one host differ in model: NVIDIA A100-SXM4-40GB, NVIDIA A100-SXM4-80GB" \
        in messages(fs, Status.FAIL)


# ---------------------------------------------------------------- Paddle stack
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


# ---------------------------------------------------------------- CPU
QUOTA = CpuQuota(version=1, quota_us=25000, period_us=100000, cores=0.25)
CPU_CASES = [
    ("alike", same(4), [], []),
    ("quota", {**same(3), "node04": {"cpu": cpu(effective=0.25, quota=QUOTA)}},
     ["node04: 0.25 effective cores (cgroup v1 quota 25000/100000 us) vs cluster median 16"], []),
    ("smaller-host-warns", {**same(3), "node04": {"cpu": cpu(effective=12, logical=12)}},
     [], ["node04: 12 effective cores (12 logical cores) vs cluster median 16"]),
]


@pytest.mark.parametrize("hosts,fails,warns", [c[1:] for c in CPU_CASES],
                         ids=[c[0] for c in CPU_CASES])
def test_cpu_cores(hosts, fails, warns):
    fs = list(cpu_check.check(cluster(**hosts)))
    assert messages(fs, Status.FAIL) == fails
    assert messages(fs, Status.WARN) == warns


def test_cpu_section_error():
    fs = list(cpu_check.check(cluster(a={}, b={"cpu": SectionError("OSError: /proc/stat")})))
    assert messages(fs, Status.COULD_NOT_CHECK) == [
        "b: could not read CPU facts: OSError: /proc/stat"]


def test_unreachable_hosts_are_left_to_reachability():
    c = cluster(node01={}, node02={}, node03=REFUSED)
    for spec in ALL_CHECKS:
        for f in spec.run(c):
            if spec.name != reachability.NAME:
                assert "node03" not in f.hosts
