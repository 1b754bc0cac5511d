"""The probe's NVML path, run for real against a stand-in pynvml (no GPU in CI)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from probetools import probe_cmd
from support import cluster

from preflight.checks import gpu_health
from preflight.collect.parse import parse_probe_output
from preflight.model.facts import GpuFacts, PaddleFacts, SectionError
from preflight.model.findings import Status

ROOT = pathlib.Path(__file__).resolve().parents[2]


def probe_gpus(scenario: str = "h100") -> GpuFacts | SectionError:
    """The probe's GPU section with the stand-in pynvml in the given scenario."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "fixtures" / "fake_pynvml"),
               FAKE_NVML=scenario)
    out = subprocess.run(probe_cmd("--python", "/nonexistent", "--sample", "0.05"),
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    return parse_probe_output(out.stdout).gpu


SMI_BIN = ROOT / "tests" / "fixtures" / "fake_nvidia_smi"


def probe_gpus_smi(scenario: str = "h100") -> GpuFacts | SectionError:
    """The probe's GPU section on a host without nvidia-ml-py (neither the probe's python nor
    the training one has it), through the stand-in nvidia-smi in the given scenario."""
    env = dict(os.environ, PATH=f"{SMI_BIN}{os.pathsep}{os.environ['PATH']}",
               FAKE_NVML=scenario)
    env.pop("PYTHONPATH", None)
    out = subprocess.run(probe_cmd("--python", "/nonexistent", "--sample", "0.05"),
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    return parse_probe_output(out.stdout).gpu


def health(g: GpuFacts) -> list[tuple[Status, str]]:
    return [(f.status, f.message) for f in gpu_health.check(cluster(n1={"gpu": g}))
            if f.status is not Status.PASS]


def test_probe_reads_gpus_through_pynvml():
    g = probe_gpus()
    assert isinstance(g, GpuFacts), g
    assert (g.source, g.driver, g.cuda_driver) == ("nvml", "550.54.15", "12.4")
    assert [d.memory_total_mib for d in g.devices] == [81559, 81559]
    d0, d1 = g.devices
    assert (d0.compute_capability, d0.ecc_mode, d0.mig_mode, d0.power_limit_w) == (
        "9.0", "enabled", "disabled", 700.0)
    assert d0.nvlink_up == 18 and d0.retired_pages_pending is None  # NotSupported -> unknown
    assert (d1.clock_event_reasons, d1.processes) == (0x41, 1)
    fs = list(gpu_health.check(cluster(n1={"gpu": g})))
    fails = [f.message for f in fs if f.status is Status.FAIL]
    assert fails == [
        "n1: GPU1 (NVIDIA H100 80GB HBM3): clocks slowed by hardware thermal slowdown",
        "n1: GPU1 (NVIDIA H100 80GB HBM3): already busy: 1 compute process(es) running"]


def test_an_old_driver_still_reports_slowdowns_through_the_older_call():
    # Before r535 the EventReasons call raises FunctionNotFound; ThrottleReasons answers.
    g = probe_gpus("old-driver")
    assert isinstance(g, GpuFacts) and g.driver == "525.147.05"
    assert [d.clock_event_reasons for d in g.devices] == [0x1, 0x41]
    assert (Status.FAIL, "n1: GPU1 (NVIDIA H100 80GB HBM3): clocks slowed by hardware thermal "
            "slowdown") in health(g)


def test_a_lost_gpu_is_its_own_finding_and_the_others_are_still_read():
    g = probe_gpus("lost-gpu")
    assert isinstance(g, GpuFacts)
    d0, d1 = g.devices
    assert d0.name == "NVIDIA H100 80GB HBM3" and d0.error is None
    assert d1.error == "NVMLError_GpuIsLost: GPU is lost"
    assert (Status.FAIL, "n1: GPU1 (unreadable): NVML cannot read it (NVMLError_GpuIsLost: GPU "
            "is lost): a lost GPU (see the kernel log for an Xid); drain the host, reset or "
            "replace the GPU") in health(g)


def test_no_driver_loaded_is_said_not_taken_for_no_gpu():
    g = probe_gpus("no-driver")
    # No /dev/nvidiactl here: without a driver node the probe goes on to nvidia-smi, then
    # says none; on a host with the device nodes it is the section's error (gpu_facts).
    assert isinstance(g, GpuFacts) and g.source == "none"


def test_an_nvswitch_fabric_that_never_came_up_fails_every_gpu():
    up = probe_gpus()
    assert isinstance(up, GpuFacts)
    assert {(d.fabric_state, d.fabric_problems) for d in up.devices} == {("completed", ())}
    down = probe_gpus("fabric-down")
    assert isinstance(down, GpuFacts)
    fabric = [m for s, m in health(down) if "fabric" in m]
    assert len(fabric) == 2 and fabric[0].startswith(
        "n1: GPU0 (NVIDIA H100 80GB HBM3): NVSwitch fabric not started: the GPU has not "
        "joined the NVLink fabric (is nvidia-fabricmanager running")
    assert all(s is Status.FAIL for s, m in health(down) if "fabric" in m)


def test_a_degraded_fabric_is_named_per_gpu_and_pcie_cards_have_none():
    g = probe_gpus("fabric-degraded")
    assert isinstance(g, GpuFacts)
    assert g.devices[1].fabric_problems == ("bandwidth degraded", "route unhealthy")
    fabric = [(s, m) for s, m in health(g) if "fabric" in m]
    assert fabric == [
        (Status.WARN, "n1: GPU1 (NVIDIA H100 80GB HBM3): NVSwitch fabric: bandwidth degraded "
         "(see the Fabric Manager log)"),
        (Status.FAIL, "n1: GPU1 (NVIDIA H100 80GB HBM3): NVSwitch fabric: route unhealthy "
         "(see the Fabric Manager log)")]
    pcie = probe_gpus("pcie")  # NotSupported: no fabric, nothing to say of it
    assert isinstance(pcie, GpuFacts)
    assert {d.fabric_state for d in pcie.devices} == {None}
    assert not [m for _, m in health(pcie) if "fabric" in m]
    # An older driver lacks the versioned call: the plain one still tells the state.
    old = probe_gpus("old-driver")
    assert isinstance(old, GpuFacts)
    assert {d.fabric_state for d in old.devices} == {"completed"}


def fake_nvml(monkeypatch, scenario: str):
    """The stand-in pynvml loaded in this process, in a scenario."""
    import importlib.util
    monkeypatch.setenv("FAKE_NVML", scenario)
    path = ROOT / "tests" / "fixtures" / "fake_pynvml" / "pynvml.py"
    spec = importlib.util.spec_from_file_location(f"fake_pynvml_{scenario}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scenario, error", [
    ("no-driver", "NVMLError_DriverNotLoaded: Driver Not Loaded"),
    ("no-library", "NVMLError_LibraryNotFound: NVML Shared Library Not Found")])
def test_a_driver_whose_nvml_cannot_start_is_a_finding_not_no_gpu(monkeypatch, scenario, error):
    from preflight.collect.parse import parse_probe_output
    from preflight.hostside import probe as probe_script
    from preflight.hostside import probe_gpu
    # A host with the driver's device node, NVML failing and no nvidia-smi on the PATH.
    monkeypatch.setattr(os.path, "exists", lambda p: p == "/dev/nvidiactl")
    monkeypatch.setattr(probe_gpu, "which", lambda name: None)
    pynvml = fake_nvml(monkeypatch, scenario)
    with pytest.raises(RuntimeError) as e:
        probe_gpu.gpu_inventory(pynvml, None)
    assert str(e.value) == ("NVIDIA driver present but no usable NVML or nvidia-smi (NVML: "
                            f"{error})")
    # As the probe reports it: the GPU section is missing with that reason, and every GPU
    # check says it could not check, never a pass on "no GPU".
    section = probe_script.section(probe_gpu.gpu_facts, pynvml, None)
    doc = {"schema": 1, "gpu": section}
    g = parse_probe_output(probe_script.to_json(doc)).gpu
    assert isinstance(g, SectionError) and error in g.message
    fs = list(gpu_health.check(cluster(n1={"gpu": g})))
    assert [f.status for f in fs] == [Status.COULD_NOT_CHECK]


def test_without_the_driver_nvml_failing_to_load_is_no_gpu():
    # The same failure on a host without NVIDIA's device nodes (this one): a CPU host.
    g = probe_gpus("no-library")
    assert isinstance(g, GpuFacts) and g.source == "none" and not g.devices


def test_counters_a_container_may_not_read_are_unknown_not_zero():
    g = probe_gpus("no-permission")
    assert isinstance(g, GpuFacts)
    assert {(d.ecc_uncorrected_volatile, d.remapped_rows_pending) for d in g.devices} == \
        {(None, None)}
    assert [d.clock_event_reasons for d in g.devices] == [0x1, 0x41]


def test_a_software_power_cap_warns_and_a_hardware_slowdown_fails():
    g = probe_gpus("sw-cap")
    assert isinstance(g, GpuFacts)
    assert health(g) == [
        (Status.WARN, "n1: GPU0 (NVIDIA H100 80GB HBM3): clocks slowed by software power cap"),
        (Status.WARN, "n1: GPU1 (NVIDIA H100 80GB HBM3): clocks slowed by software power cap")]


def test_one_gpu_state_reads_the_same_through_nvml_and_nvidia_smi():
    # The stand-in's GPU0 as NVML gives it, and as nvidia-smi prints the same state.
    from preflight.checks import gpu_homogeneous
    from preflight.collect.smi import parse_smi_csv
    from preflight.hostside.probe_gpu import SMI_FIELDS
    nvml = probe_gpus()
    assert isinstance(nvml, GpuFacts)
    row = ("0, NVIDIA H100 80GB HBM3, GPU-00000000-aaaa-bbbb-cccc-dddddddddddd, 81559, 9.0, "
           "550.54.15, 96.00.89.00.01, Enabled, Disabled, Enabled, 700.00, 16, 16\n")
    smi = parse_smi_csv(SMI_FIELDS, row)
    a, b = nvml.devices[0], smi.devices[0]
    for field in ("name", "uuid", "memory_total_mib", "compute_capability", "vbios", "ecc_mode",
                  "mig_mode", "persistence_mode", "power_limit_w", "pcie_width"):
        assert getattr(a, field) == getattr(b, field), field
    # So a host read through NVML and one through nvidia-smi differ in nothing but source.
    one = GpuFacts("nvml", nvml.driver, nvml.cuda_driver, (a,))
    c = cluster(n1={"gpu": one}, n2={"gpu": smi})
    assert [f.message for f in gpu_homogeneous.check(c) if f.status is not Status.PASS] == []


def probe_paddle(scenario: str = "ok") -> PaddleFacts:
    """The probe's Paddle section with the stand-in GPU build of Paddle in a scenario."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "fixtures" / "fake_paddle_gpu"),
               FAKE_PADDLE=scenario)
    out = subprocess.run(probe_cmd("--python", sys.executable, "--sample", "0.05"),
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    p = parse_probe_output(out.stdout).paddle
    assert isinstance(p, PaddleFacts) and p.available, p
    return p


def test_the_loaded_nccl_and_cudnn_are_read_beside_the_build_time_ones():
    p = probe_paddle()
    assert (p.nccl, p.nccl_runtime) == ("22501", "22105")
    assert (p.cudnn, p.cudnn_runtime) == ("9.5.0", "90100")


def compat(p: PaddleFacts) -> list[tuple[Status, str]]:
    from support import gpu

    from preflight.checks import stack_compat
    c = cluster(h={"paddle": p, "gpu": gpu(n=2, driver="570.86.15")})  # new enough for 12.6
    return [(f.status, f.message) for f in stack_compat.check(c) if f.status is not Status.PASS]


def test_a_tiny_op_on_every_gpu_tells_a_gpu_paddle_cannot_run_on():
    fine = probe_paddle()
    assert (fine.gpu_visible, fine.gpu_ops) == (2, ((0, None), (1, None)))
    assert compat(fine) == []
    broken = probe_paddle("no-kernel")
    assert broken.gpu_ops is not None and broken.gpu_ops[0] == (0, None)
    [(status, message)] = compat(broken)
    assert status is Status.FAIL and message.startswith(
        "h: GPU1: Paddle cannot compute on it: RuntimeError: (PreconditionNotMet)")
    assert message.endswith("(the build lacks this GPU's architecture: install a build for it)")


def test_paddle_that_sees_no_gpu_on_a_gpu_host_fails():
    unseen = probe_paddle("unseen")
    assert (unseen.gpu_visible, unseen.gpu_ops) == (0, ())
    assert compat(unseen) == [(Status.FAIL, "h: Paddle sees no GPU of the 2 the driver lists: "
                               "a container without the GPUs' compute capability, an empty "
                               "CUDA_VISIBLE_DEVICES, or a CUDA that cannot start")]


def test_the_probe_reads_infiniband_ports_as_sysfs_shows_them(tmp_path):
    from preflight.hostside import probe_net as probe_script
    for dev, port, state, rate, layer in (
            ("mlx5_0", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)", "InfiniBand"),
            ("mlx5_1", "1", "1: DOWN", "10 Gb/sec (4X SDR)", "InfiniBand"),
            ("mlx5_2", "1", "4: ACTIVE", "100 Gb/sec (2X EDR)", "Ethernet")):
        base = tmp_path / dev / "ports" / port
        base.mkdir(parents=True)
        (base / "state").write_text(state + "\n")
        (base / "rate").write_text(rate + "\n")
        (base / "link_layer").write_text(layer + "\n")
    raw = probe_script.infiniband_ports(str(tmp_path))
    assert raw[1] == {"device": "mlx5_1", "port": 1, "state": "DOWN",
                      "rate": "10 Gb/sec (4X SDR)", "link_layer": "InfiniBand"}
    from preflight.collect.parse import network
    net = network({"interfaces": [], "ib_ports": raw})
    assert [(p.device, p.state, p.rate_gbps, p.link_layer) for p in net.ib_ports] == [
        ("mlx5_0", "ACTIVE", 200.0, "InfiniBand"), ("mlx5_1", "DOWN", 10.0, "InfiniBand"),
        ("mlx5_2", "ACTIVE", 100.0, "Ethernet")]
    assert probe_script.infiniband_ports(str(tmp_path / "none")) == []


def test_xid_lines_of_the_kernel_log_are_read_and_parsed():
    from preflight.collect.parse import gpu as parse_gpu
    from preflight.hostside import probe_gpu as probe_script
    log = ("[  12.3] nvidia: module loaded\n"
           "[ 812.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen "
           "off the bus.\n"
           "[ 900.1] NVRM: Xid (PCI:0000:86:00): 13, Graphics SM Warp Exception\n")
    raw = probe_script.xid_events(log)
    assert raw == {"events": [["PCI:0000:3b:00", 79, "pid=1234, name=python, GPU has fallen "
                               "off the bus."],
                              ["PCI:0000:86:00", 13, "Graphics SM Warp Exception"]]}
    g = parse_gpu({"source": "none", "devices": [], "xid": raw})
    assert [c for _, c, _ in g.xid or ()] == [79, 13]
    g = parse_gpu({"source": "none", "devices": [], "xid": {"error": "kernel log not readable"}})
    assert (g.xid, g.xid_error) == (None, "kernel log not readable")


def test_the_gpu_capture_tool_writes_what_the_capture_test_reads(tmp_path):
    # The tool a GPU machine runs (tests/fixtures/capture_gpu.py), run here on the stand-ins,
    # and its output read by the test that checks real captures.
    env = dict(os.environ, PATH=f"{SMI_BIN}:{os.environ['PATH']}", FAKE_NVML="h100",
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "fixtures" / "fake_pynvml"),
                                           str(ROOT / "tests")]))
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "capture_gpu.py"),
                          "--out", str(tmp_path / "gpu")], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "gpu").glob("*.json")
    assert path.name == "nvidia-h100-80gb-hbm3.json"
    assert out.stdout.startswith(f"{path}: 2 GPUs (NVIDIA H100 80GB HBM3), driver 550.54.15")
    import json

    from facttools import gpu_sources_agree
    doc = json.loads(path.read_text())
    assert "<attached_gpus>2</attached_gpus>" in doc["smi_xml"]
    nvml, _ = gpu_sources_agree(doc)
    assert [d.fabric_state for d in nvml.devices] == ["completed", "completed"]


def test_nvidia_smi_fails_a_gpu_with_uncorrectable_ecc_errors():
    # Without nvidia-ml-py the probe read identity only: this GPU passed with a warning.
    g = probe_gpus_smi("ecc")
    assert isinstance(g, GpuFacts) and g.source == "nvidia-smi", g
    assert health(g) == [
        (Status.FAIL, "n1: GPU0 (NVIDIA H100 80GB HBM3): 3 uncorrectable ECC errors since boot "
                      "(drain the host, reset or replace the GPU)"),
        (Status.FAIL, "n1: GPU0 (NVIDIA H100 80GB HBM3): row remapping pending: the GPU needs "
                      "a reset"),
        (Status.FAIL, "n1: GPU1 (NVIDIA H100 80GB HBM3): retired pages pending: the GPU needs "
                      "a reset to retire them")]


HEALTH = ("ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
          "remapped_rows_failure", "clock_event_reasons", "processes")


@pytest.mark.parametrize("scenario", ["h100", "old-driver", "no-permission", "sw-cap", "ecc"])
def test_one_gpu_state_is_judged_alike_through_nvml_and_nvidia_smi(scenario):
    nvml, smi = probe_gpus(scenario), probe_gpus_smi(scenario)
    assert isinstance(nvml, GpuFacts) and isinstance(smi, GpuFacts), (nvml, smi)
    assert (nvml.source, smi.source) == ("nvml", "nvidia-smi")
    assert len(nvml.devices) == len(smi.devices) == 2
    for a, b in zip(nvml.devices, smi.devices):
        assert {f: getattr(a, f) for f in HEALTH} == {f: getattr(b, f) for f in HEALTH}
    assert health(nvml) == health(smi)


def test_an_old_nvidia_smi_reports_slowdowns_under_the_older_field_name():
    # Before r535 nvidia-smi rejects clocks_event_reasons.active, failing the whole query:
    # the probe asks again with clocks_throttle_reasons.active, keeping the other fields.
    g = probe_gpus_smi("old-driver")
    assert isinstance(g, GpuFacts) and g.driver == "525.147.05"
    assert [d.clock_event_reasons for d in g.devices] == [0x1, 0x41]
    assert [d.compute_capability for d in g.devices] == ["9.0", "9.0"]
    assert (Status.FAIL, "n1: GPU1 (NVIDIA H100 80GB HBM3): clocks slowed by hardware thermal "
            "slowdown") in health(g)


def test_nvidia_smi_without_a_driver_is_a_section_error_with_its_words():
    g = probe_gpus_smi("no-driver")
    assert isinstance(g, SectionError), g
    assert "couldn't communicate with the NVIDIA driver" in g.message
