"""cgroup v2 as a real machine showed it (tests/fixtures/cgroup2/h200-quota-half-core.json,
captured by tests/fixtures/capture_cgroup2.py on the GPU machine: Ubuntu 24.04, kernel 6.18,
cgroup2 mounted at /sys/fs/cgroup with nsdelegate). A job's cgroup, preflight-capture, holds
`cpu.max` 50000 100000 and `memory.max` 1 GiB; its processes sit in leaves below it, as under
Slurm or a container runtime.

The readers are run on the captured cgroup files laid out in a directory, with
/proc/self/cgroup and mountinfo's cgroup2 lines as each shape of mount showed them there: the
hierarchy mounted whole, the job's cgroup bound over the mount point (a container without a
cgroup namespace: mountinfo's root field is the job's cgroup), and a cgroup namespace entered
without a mount of its own (root field /../..)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from facttools import probe_output
from support import cluster, messages

from preflight.checks import cpu_cores
from preflight.collect.parse import parse_probe_output
from preflight.hostside import cgroup
from preflight.model.facts import CpuFacts
from preflight.model.findings import Status
from preflight.watch.samples import HostStream
from preflight.watch.series import WatchState

HERE = Path(__file__).resolve().parents[2] / "fixtures"
CAPTURE = json.loads((HERE / "cgroup2" / "h200-quota-half-core.json").read_text())
MOUNT = CAPTURE["mount"]
TOP = "preflight-capture"


def lay_out(base: Path, shown: str) -> Path:
    """The captured cgroups as a mount showing `shown` (a cgroup's path, "/" the whole
    hierarchy) sees them: its files at the mount point, those below it under their names."""
    point = base / "cgroup"
    trees = {"": CAPTURE["root_files"], **CAPTURE["cgroups"]}
    for rel, files in trees.items():
        full = "/" + rel
        if full != shown and not full.startswith(shown.rstrip("/") + "/"):
            continue
        d = point / full[len(shown.rstrip("/")):].lstrip("/")
        d.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (d / name).write_text(text)
    return point


def reading(monkeypatch: pytest.MonkeyPatch, point: Path, self_cgroup: str,
            mountinfo: list[str]) -> None:
    """The readers see the shape's /proc files, and the laid-out tree where it was mounted."""
    lines = "\n".join(ln.replace(f" {MOUNT} ", f" {point} ") for ln in mountinfo) + "\n"
    real = cgroup.read

    def read(path: str, limit: int = 65536) -> str:
        if path == "/proc/self/mountinfo":
            return lines
        if path == "/proc/self/cgroup":
            return self_cgroup
        return str(real(path, limit))
    monkeypatch.setattr(cgroup, "read", read)


def test_the_job_cgroups_quota_is_read_from_a_leaf_below_it(tmp_path, monkeypatch):
    point = lay_out(tmp_path, "/")
    shape = CAPTURE["probe"]["bind"]  # the same process, before its bind: its own cgroup
    reading(monkeypatch, point, shape["self_cgroup"], CAPTURE["mountinfo_cgroup2"])
    assert shape["self_cgroup"] == f"0::/{TOP}/probe\n"
    assert cgroup.cgroup_v2_dir() == (str(point / TOP / "probe"), str(point))
    q = cgroup.cgroup_v2_quota()
    assert q is not None
    assert (q["cores"], q["quota_us"], q["period_us"], q["path"]) == (
        0.5, 50000, 100000, str(point / TOP))


def test_a_bind_of_the_jobs_cgroup_over_the_mount_point_is_read_from_its_root(
        tmp_path, monkeypatch):
    # The mount root field is /preflight-capture while /proc/self/cgroup names the whole
    # path: the part the mount shows is stripped, as cgroup v1's mounts always were.
    shape = CAPTURE["probe"]["bind"]
    assert [ln.split()[3] for ln in shape["mountinfo_cgroup2"]] == ["/", f"/{TOP}"]
    point = lay_out(tmp_path, f"/{TOP}")
    reading(monkeypatch, point, shape["self_cgroup"], shape["mountinfo_cgroup2"])
    assert cgroup.cgroup_v2_dir() == (str(point / "probe"), str(point))
    q = cgroup.cgroup_v2_quota()
    assert q is not None and (q["cores"], q["path"]) == (0.5, str(point))


def test_a_cgroup_namespace_without_its_own_mount_finds_its_cgroup_by_its_pid(
        tmp_path, monkeypatch):
    # Inside the namespace the process is in "/" and the mount's root is two levels above
    # it (/../..): the names between are hidden, so the directory two levels down that
    # lists the process is its cgroup (the capture's probe leaf, with this process's pid
    # put in it as the probe's was while it ran).
    shape = CAPTURE["probe"]["cgroupns"]
    assert shape["self_cgroup"] == "0::/\n"
    assert [ln.split()[3] for ln in shape["mountinfo_cgroup2"]] == ["/../.."]
    point = lay_out(tmp_path, "/")
    (point / TOP / "probe" / "cgroup.procs").write_text(f"{os.getpid()}\n")
    reading(monkeypatch, point, shape["self_cgroup"], shape["mountinfo_cgroup2"])
    assert cgroup.cgroup_v2_dir() == (str(point / TOP / "probe"), str(point))
    q = cgroup.cgroup_v2_quota()
    assert q is not None and (q["cores"], q["path"]) == (0.5, str(point / TOP))
    # ...and where no directory there lists it, the cgroup is not guessed.
    (point / TOP / "probe" / "cgroup.procs").write_text("")
    assert cgroup.cgroup_v2_dir() is None and cgroup.cgroup_v2_quota() is None


def test_a_quota_above_a_namespaces_own_mount_is_not_visible_from_inside(tmp_path, monkeypatch):
    # A cgroup namespace with the hierarchy mounted again inside it shows only the
    # namespace's own subtree: the job's quota one level up is out of its sight (the
    # probe there reported 16 effective cores; run it on the host to see the quota).
    shape = CAPTURE["probe"]["cgroupns-remounted"]
    assert [ln.split()[3] for ln in shape["mountinfo_cgroup2"]] == ["/"]
    point = lay_out(tmp_path, f"/{TOP}/probe")
    reading(monkeypatch, point, shape["self_cgroup"], shape["mountinfo_cgroup2"])
    assert cgroup.cgroup_v2_dir() == (str(point), str(point))
    assert cgroup.cgroup_v2_quota() is None
    run = json.loads(shape["run"]["out"])
    assert run["cpu"]["quota"] is None and run["cpu"]["effective"] == 16.0


def test_the_mount_root_of_a_part_not_holding_the_cgroup_shows_nothing():
    assert cgroup.under_mount("/other/job", "/job", "/sys/fs/cgroup", "self") is None
    assert cgroup.under_mount("/jobx/a", "/job", "/sys/fs/cgroup", "self") is None
    assert cgroup.under_mount("/job/a", "/job/", "/mnt", "self") == "/mnt/a"
    assert cgroup.under_mount("/a/b", "/", "/mnt", "self") == "/mnt/a/b"


# The probe, shipped and run in the job's cgroup (the capture's "mounted" shape), as the
# golden case h200-cgroup2-half-core.
REAL = parse_probe_output(probe_output("h200-cgroup2-half-core"), received_at=1.0)
assert isinstance(REAL.cpu, CpuFacts)
CPU: CpuFacts = REAL.cpu


def test_the_probe_reads_the_quota_as_the_cores_the_job_gets():
    assert CPU.quota is not None and (CPU.quota.version, CPU.quota.cores) == (2, 0.5)
    assert (CPU.logical, CPU.effective) == (16, 0.5)
    # Other work is counted in the quota's cgroup, not machine-wide: the busy process and
    # the stand-in rank beside the probe, within the half core they share.
    assert CPU.other_work is not None
    assert CPU.other_work.scope == f"cgroup v2 {MOUNT}/{TOP}"
    assert 0 < CPU.other_work.busy_cores <= 0.5
    mem = json.loads(CAPTURE["probe"]["mounted"]["run"]["out"])["memory"]
    assert mem["cgroup_limit_bytes"] == 1 << 30


def test_cpu_cores_fails_the_host_whose_cgroup_v2_quota_is_half_a_core():
    free = replace(CPU, quota=None, effective=16.0, other_work=None)
    c = cluster(node01={"cpu": free}, node02={"cpu": free}, node03={"cpu": CPU})
    said = messages(cpu_cores.check(c), Status.FAIL)
    assert len(said) == 1 and "node03" in said[0] and "0.5" in said[0], said
    assert not any("node01" in m or "node02" in m for m in said)


def test_the_sampler_reads_the_quota_and_its_throttling_for_the_rank():
    # The sampler's lines beside the stand-in rank (its two workers and a busy process in
    # the same leaf, 2.5 cores of demand under half a core), every 2 s.
    lines = (HERE / "watch" / "cgroup2-h200.jsonl").read_text().splitlines()
    stream, state = HostStream("gpu1"), WatchState(keep=12)
    ticks = [stream.feed(ln) for ln in lines]
    for i, tick in enumerate(ticks):
        state.add(tick, received=2.0 * i)
    samples = [s for t in ticks for _, s in t.ranks]
    assert len(samples) == len(lines) >= 3
    first, last = samples[0], samples[-1]
    assert {s.quota_cores for s in samples} == {0.5}
    assert first.periods is not None and last.periods is not None
    assert first.throttled is not None and last.throttled is not None
    periods, throttled = last.periods - first.periods, last.throttled - first.throttled
    assert periods > 0 and throttled / periods >= 0.9, (periods, throttled)
    assert (last.throttled_s or 0) > (first.throttled_s or 0)
    # What the watch's rules read: the span's share of throttled periods.
    [job] = state.jobs.values()
    [series] = job.ranks.values()
    span = series.span(first.t, last.t, "steps")
    assert span is not None and span.throttled / span.periods >= 0.9
