"""The GPU checks on what a real NVIDIA H200 machine's probe reported (driver 580.159.04,
CUDA 13.0, NVML through nvidia-ml-py; tests/fixtures/facts/*/h200-no-paddle.json): a cluster
of such hosts passes, and a real H200 beside an H100, or a Paddle whose CUDA or kernels do not
fit it, is judged as an operator would."""

from __future__ import annotations

import dataclasses

from facttools import probe_output
from support import cluster, messages, paddle

from preflight.checks import gpu_health, gpu_homogeneous, stack_compat
from preflight.collect.parse import parse_probe_output
from preflight.model.facts import GpuFacts, PaddleFacts
from preflight.model.findings import Status

H200 = parse_probe_output(probe_output("h200-no-paddle"), received_at=1.0)
assert isinstance(H200.gpu, GpuFacts) and isinstance(H200.paddle, PaddleFacts)
GPU: GpuFacts = H200.gpu
PADDLE: PaddleFacts = H200.paddle
GPU_BUILD = paddle(cuda="12.6", cudnn="9.5.1", nccl="22304", cuda_archs=(80, 90))


def test_the_capture_reads_as_the_machine_it_came_from():
    assert (GPU.source, GPU.driver, GPU.cuda_driver) == ("nvml", "580.159.04", "13.0")
    [d] = GPU.devices
    assert (d.name, d.memory_total_mib, d.compute_capability) == ("NVIDIA H200", 143771, "9.0")
    assert (d.ecc_mode, d.mig_mode, d.ecc_uncorrected_volatile) == ("enabled", "disabled", 0)
    assert PADDLE.available is False and "No module named 'paddle'" in (PADDLE.reason or "")


def test_hosts_of_real_h200s_pass_the_gpu_checks():
    c = cluster(node01={"gpu": GPU, "paddle": GPU_BUILD},
                node02={"gpu": GPU, "paddle": GPU_BUILD})
    for check in (gpu_homogeneous, gpu_health, stack_compat):
        bad = [f.message for f in check.check(c) if f.status is not Status.PASS]
        assert bad == [], (check.__name__, bad)


def test_a_real_h200_beside_an_h100_host_is_named_with_both_models():
    c = cluster(node01={"gpu": GPU}, node02={"gpu": GPU},
                node03={"gpu": dataclasses.replace(GPU, devices=tuple(
                    dataclasses.replace(d, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559)
                    for d in GPU.devices))})
    said = " ".join(messages(gpu_homogeneous.check(c), Status.FAIL))
    assert "node03" in said and "H100" in said and "H200" in said, said


def test_a_paddle_built_for_a_later_cuda_13_runs_on_the_real_driver_with_a_warning():
    # 580.159.04 is CUDA 13.0's driver: 13.2 runs through minor-version compatibility only.
    c = cluster(node01={"gpu": GPU, "paddle": paddle(cuda="13.2", cuda_archs=(90,))})
    said = " ".join(messages(stack_compat.check(c), Status.WARN))
    assert "node01: driver 580.159.04 runs CUDA 13.2 only through minor-version " \
        "compatibility" in said, said
    assert messages(stack_compat.check(c), Status.FAIL) == []


def test_a_paddle_without_kernels_for_the_real_h200_is_said_to_rely_on_ptx_jit():
    c = cluster(node01={"gpu": GPU, "paddle": paddle(cuda="12.6", cuda_archs=(70, 80))})
    said = " ".join(messages(stack_compat.check(c), Status.WARN))
    assert "node01: compute capability 9.0 is not covered by Paddle's cuda_archs [70, 80]" \
        in said, said
