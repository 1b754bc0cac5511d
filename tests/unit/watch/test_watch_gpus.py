"""The watch's GPU judgement on sampler lines: a slowed GPU named on the rank that drives it,
as the straggler only where the job's pace fell with it; GPUs said beside a hang."""

from __future__ import annotations

import pathlib
from dataclasses import replace
from typing import Any

import pytest
from watchtools import POLICY, cluster, gpu_cluster, named, nobody_named, quota_starved, watched

from preflight.model.findings import Status
from preflight.watch.gpus import slowed_now
from preflight.watch.judge import AtCheck, judge
from preflight.watch.metrics import Metrics
from preflight.watch.samples import HostStream
from preflight.watch.series import WatchState

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "watch"

THERMAL = 0x40 | 0x1  # hardware thermal slowdown (and idle, as NVML also says of busy GPUs)


def slow_gpu(host, sm=1215, reasons=THERMAL):
    host.gpus[0].update(sm=sm, reasons=reasons, temp=91)


def test_a_gpu_slowed_when_the_job_slowed_is_the_straggler_and_nobody_else():
    hosts = gpu_cluster()

    def heat(t):
        if t == 25:  # after the job's early pace was measured (15 s)
            slow_gpu(hosts[2])
            for h in hosts:  # a synchronous job: every rank steps at the slow GPU's pace
                h.ranks[0].steps_per_s = 6.0

    findings, _ = watched(hosts, 50, change=heat)
    assert named(findings) == [("straggler", Status.FAIL, ("node03",))]
    msg = findings[0].message
    assert msg.startswith("node03 rank 2 (worker) holds its peers back: its GPU 0 runs at 1215 "
                          "of 1980 MHz (hardware thermal slowdown); its peers' GPUs at 1980 MHz")
    assert "the job steps at 0.60 of its pace at the start" in msg


def test_a_slowed_gpu_while_the_pace_holds_is_a_warning_on_its_rank():
    hosts = gpu_cluster()
    hosts[1].gpus[0].update(sm=1400, reasons=0x20)  # software thermal slowdown, busy

    findings, _ = watched(hosts, 40)
    assert named(findings) == [("gpu", Status.WARN, ("node02",))]
    assert "its GPU 0 runs at 1400 of 1980 MHz (software thermal slowdown)" in \
        findings[0].message
    assert "the job's pace has not fallen" in findings[0].message


def test_a_clock_far_below_its_peers_with_no_reason_given_is_named():
    hosts = gpu_cluster()
    hosts[3].gpus[0].update(sm=1100)  # no reason bit: a clock locked low (nvidia-smi -lgc)

    findings, _ = watched(hosts, 40)
    assert named(findings) == [("gpu", Status.WARN, ("node04",))]
    assert "its GPU 0 runs at 1100 of 1980 MHz; its peers' GPUs at 1980 MHz" in \
        findings[0].message


@pytest.mark.parametrize("change", [
    {"util": 0, "sm": 345, "reasons": 0x4 | 0x1},  # idle, held to its power cap: not slow
    {"util": 30, "sm": 900},  # lightly used: a low clock is the driver saving power
    {"sm": 1800},  # within the margin of its peers
], ids=["idle-power-cap", "light-load", "within-margin"])
def test_what_a_healthy_gpu_also_shows_names_nobody(change):
    hosts = gpu_cluster()
    hosts[0].gpus[0].update(change)
    findings, _ = watched(hosts, 40)
    assert named(findings) == []


def test_a_slowdown_shorter_than_the_window_names_nobody():
    hosts = gpu_cluster()

    def late(t):
        if t == 35:  # two samples of 15 s
            slow_gpu(hosts[0])

    findings, _ = watched(hosts, 40, change=late)
    assert named(findings) == []


def test_a_rank_named_for_its_cpu_has_its_slowed_gpu_said_on_that_finding_once():
    hosts = gpu_cluster()
    # node02 starved of CPU, its GPU capped too
    starve = quota_starved(hosts, also=lambda h: slow_gpu(h, sm=1500, reasons=0x4))
    findings, _ = watched(hosts, 40, change=starve,
                          at_check={h.name: AtCheck(cores=2.0) for h in hosts})
    assert named(findings) == [("straggler", Status.FAIL, ("node02",))]
    msg = findings[0].message
    assert "its cgroup's CPU quota throttles it" in msg
    assert msg.endswith("; its GPU 0 runs at 1500 of 1980 MHz (software power cap); its "
                        "peers' GPUs at 1980 MHz")


def test_a_ps_trainer_on_a_slowed_gpu_warns_that_it_slows_only_itself():
    hosts = gpu_cluster(3)
    for h in hosts:
        h.ranks[0].role = "TRAINER"
    slow_gpu(hosts[0])
    findings, _ = watched(hosts, 40)
    assert named(findings) == [("gpu", Status.WARN, ("node01",))]
    assert findings[0].message.endswith("in async mode it slows only itself")


def test_a_hang_says_which_ranks_gpus_are_busy_and_which_idle():
    hosts = gpu_cluster()

    def hang(t):
        if t == 20:  # every rank stops stepping; three spin in a kernel, node02's GPU idles
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 0.0, 0.0
            hosts[1].gpus[0].update(util=0, sm=345)

    findings, _ = watched(hosts, 100, change=hang)
    (hung,) = [f for f in findings if f.check == "hang"]
    assert "; GPUs: 3 ranks' busy at up to 100 % (node[01,03-04]: kernels that do not end, " \
           "as a collective stuck in NCCL), 1 idle (node02: not in the collective the others " \
           "are stuck in)" in hung.message


def test_a_hang_on_hosts_without_gpus_says_nothing_of_gpus():
    hosts = cluster()

    def hang(t):
        if t == 20:
            for h in hosts:
                h.ranks[0].steps_per_s, h.ranks[0].busy = 0.0, 0.0

    findings, _ = watched(hosts, 100, change=hang)
    (hung,) = [f for f in findings if f.check == "hang"]
    assert "GPUs" not in hung.message


def test_the_gpu_part_of_a_sample_is_read_into_types():
    host = gpu_cluster(1)[0]
    host.gpus.append({"i": 1, "error": "NVMLError_GpuIsLost: GPU is lost"})
    tick = HostStream(host.name).feed(host.line())
    g0, g1 = tick.sample.gpus
    assert (g0.index, g0.util, g0.sm_mhz, g0.sm_max_mhz, g0.reasons, g0.pids) == \
        (0, 100, 1980, 1980, 0, (1000,))
    assert (g1.index, g1.util, g1.error) == (1, None, "NVMLError_GpuIsLost: GPU is lost")
    assert tick.sample.gpu_source == "nvml"
    ((_, rank),) = tick.ranks
    assert rank.gpus == (0,)


def test_a_host_whose_gpus_cannot_be_read_says_why():
    host = cluster(1)[0]
    line = host.line().replace('"cost_s"', '"gpu": {"error": "NVML: NVMLError_LibraryNotFound'
                               ': NVML Shared Library Not Found; no nvidia-smi on the PATH"}, '
                               '"cost_s"')
    tick = HostStream(host.name).feed(line)
    assert tick.sample.gpus == ()
    assert (tick.sample.gpu_error or "").startswith("NVML: NVMLError_Lib")


def test_the_metrics_carry_each_gpu(tmp_path):
    hosts = gpu_cluster(2)
    slow_gpu(hosts[1])
    findings, state = watched(hosts, 20)
    m = Metrics()
    m.update(state, findings, POLICY.persist_s / 2, 20.0)
    out = tmp_path / "watch.prom"
    m.write(str(out))
    text = out.read_text()
    assert 'preflight_watch_gpu_sm_clock_hertz{gpu="0",host="node02"} 1.215e+09' in text
    assert 'preflight_watch_gpu_utilization_ratio{gpu="0",host="node01"} 1.0' in text
    assert 'preflight_watch_gpu_slowed{gpu="0",host="node02"} 1.0' in text
    assert 'preflight_watch_gpu_slowed{gpu="0",host="node01"} 0.0' in text


def test_a_gpu_lost_under_a_rank_fails_on_its_host_naming_the_rank():
    hosts = gpu_cluster()
    hosts[2].gpus[0] = {"i": 0, "error": "NVMLError_GpuIsLost: GPU is lost"}
    findings, _ = watched(hosts, 20)
    assert named(findings) == [("gpu", Status.FAIL, ("node03",))]
    assert findings[0].message == ("node03: GPU 0 does not answer (NVMLError_GpuIsLost: GPU is "
                                   "lost); node03 rank 2 (worker) runs on it")


def test_a_host_whose_gpus_do_not_answer_cannot_be_checked_for_them():
    hosts = gpu_cluster(2)
    hosts[1].gpus = []
    line = hosts[1].line

    def unreadable(dt: float = 5.0) -> str:
        return line(dt).replace('"cost_s"', '"gpu": {"error": "nvidia-smi: exit 9: NVIDIA-SMI '
                                'has failed"}, "cost_s"')

    hosts[1].line = unreadable  # type: ignore[method-assign]
    findings, _ = watched(hosts, 20)
    assert named(findings) == [("gpu", Status.COULD_NOT_CHECK, ("node02",))]
    assert "node02: its GPUs could not be read (nvidia-smi: exit 9" in findings[0].message


def test_gpus_slowed_alike_on_every_rank_are_one_warning_naming_no_rank():
    hosts = gpu_cluster()
    for h in hosts:
        slow_gpu(h, sm=1600, reasons=0x4)  # the cluster's power cap, set for every GPU
    findings, _ = watched(hosts, 40)
    assert named(findings) == [("gpu", Status.WARN, ("node01", "node02", "node03", "node04"))]
    assert findings[0].message == ("the GPUs of all 4 ranks are slowed alike (software power "
                                   "cap), at 1600-1600 MHz for 15 s: the job runs at their "
                                   "pace; no rank holds the others")


def test_a_real_h200_reads_as_its_rank_driving_it_at_full_clock_and_nothing_is_named():
    # Lines the real sampler printed on an NVIDIA H200 (NVML) while one rank, started by a
    # stand-in for Paddle's launcher with the launcher's variables, multiplied matrices on
    # GPU 0 and printed its steps: idle GPU at 345 MHz (reason: idle) while CUDA started,
    # then busy at 1980 MHz, no reason.
    lines = (FIXTURES / "gpu-h200.jsonl").read_text().splitlines()
    policy = replace(POLICY, interval_s=2.0)
    stream, state = HostStream("gpu1"), WatchState(keep=12)
    ticks = [stream.feed(ln) for ln in lines]
    for i, tick in enumerate(ticks):
        state.add(tick, received=2.0 * i)
    [(rid, first)] = ticks[0].ranks
    (_, last) = ticks[-1].ranks[0]
    assert (rid.role, rid.rank, first.gpus, last.gpus) == ("worker", 0, (0,), (0,))
    assert (last.log_steps or 0) > (first.log_steps or 0)
    idle, busy = ticks[0].sample.gpus[0], ticks[-1].sample.gpus[0]
    assert (idle.util, idle.sm_mhz, idle.reasons, idle.pids) == (0, 345, 1, ())
    assert (busy.util or 0) >= 90 and busy.sm_mhz == busy.sm_max_mhz == 1980 and busy.reasons == 0
    assert busy.pids == (rid.pid,)
    assert not slowed_now(idle) and not slowed_now(busy)
    findings = judge(state, policy, 2.0 * (len(ticks) - 1), {}, {})
    assert named(findings, "gpu") == [] and named(findings, "straggler") == [], \
        [f.message for f in findings]


def test_a_gpu_at_its_power_cap_at_its_free_peers_clock_is_named_by_nobody():
    # H100s and H200s under heavy load sit at their power limit: NVML says "software power
    # cap" while the clock is their peers'. One host's GPUs so, from the start, and the job
    # slowing for every rank (an evaluation): no judgement names that host.
    hosts = gpu_cluster()
    hosts[2].gpus[0].update(reasons=0x4, power_w=700.0)

    def evaluate(t):
        if t == 40:
            for h in hosts:
                h.ranks[0].steps_per_s = 4.0
    judgements: list[Any] = []
    watched(hosts, 120, change=evaluate, every=judgements)
    nobody_named(judgements)


def test_a_software_cap_that_holds_a_gpu_below_its_free_peers_clock_is_named():
    hosts = gpu_cluster()
    hosts[2].gpus[0].update(sm=1800, reasons=0x4)  # 9 % below its peers: within the margin
    findings, _ = watched(hosts, 40)
    assert named(findings) == [("gpu", Status.WARN, ("node03",))]
    assert "its GPU 0 runs at 1800 of 1980 MHz (software power cap)" in findings[0].message
