"""The probe's container request: the command lines the controller builds for the probe
(find the image, start the job's container as the job would, read, enter, remove), and the
container section the probe prints back, parsed."""

from __future__ import annotations

import json

from preflight.collect.container import probe_arg, probe_request
from preflight.collect.parse import parse_section
from preflight.model import facts as F
from preflight.model.container import ContainerSpec

SPEC = ContainerSpec("podman", image="localhost/paddle:3.3.1", network="host",
                     shm_size="16g", ulimits=(("memlock", "-1"),), env=(("A", "1"),))


def test_an_image_is_started_as_the_job_would_be_and_removed():
    req = probe_request(SPEC, "node01", 60)
    name = req["inspect"][-1]
    assert name.startswith("preflight-probe-node01-")
    assert req["id"] == ["podman", "image", "inspect", "--format", "{{.Id}}",
                         "localhost/paddle:3.3.1"]
    assert req["start"] == ["podman", "run", "--detach", "--rm", "--name", name, "--network",
                            "host", "--shm-size", "16g", "--ulimit", "memlock=-1", "--env",
                            "A=1", "localhost/paddle:3.3.1", "sleep", "90"]
    assert req["exec"] == ["podman", "exec", "--env", "A=1", name]
    assert req["rm"] == ["podman", "rm", "--force", "--time", "0", name]
    # One argument, JSON: quoted like any other on its way to the host.
    (flag, text) = probe_arg(SPEC, "node01", 60)
    assert flag == "--container" and json.loads(text)["runtime"] == "podman"


def test_a_running_container_is_entered_never_started_or_removed():
    req = probe_request(ContainerSpec("docker", name="trainer"), "n1", 60)
    assert req["id"] == ["docker", "inspect", "--format", "{{.Image}}", "trainer"]
    assert req["exec"] == ["docker", "exec", "trainer"] and "start" not in req and \
        "rm" not in req


def test_the_probes_container_section_parses():
    raw = {"runtime": "podman", "image": "localhost/paddle:3.3.1", "name": None,
           "image_id": "sha256:09158d", "start_s": 0.41,
           "intent": {"network_mode": "host", "ipc_mode": "private",
                      "shm_size_bytes": 65536000, "devices": [], "gpu_requests": []},
           "limits": {"nofile": {"soft": 20000, "hard": 20000},
                      "memlock": {"soft": 65536, "hard": 65536}},
           "shm": {"size_bytes": 65536000, "free_bytes": 65536000}, "host_network": True,
           "infiniband": [], "nvidia": [], "gpu_env": [["CUDA_VISIBLE_DEVICES", "0"]]}
    got = parse_section("container", raw)
    assert isinstance(got, F.ContainerFacts)
    assert got.shm == F.ShmFacts(65536000, 65536000) and got.limits is not None
    assert got.limits.memlock == F.Limit(65536, 65536)
    assert got.gpu_env == (("CUDA_VISIBLE_DEVICES", "0"),)
    assert got.intent is not None and got.intent.ipc_mode == "private"
    missing = parse_section("container", {"runtime": "docker", "image": "x",
                                          "missing": "No such image: x"})
    assert isinstance(missing, F.ContainerFacts) and missing.missing == "No such image: x"
    assert isinstance(parse_section("container", {"runtime": 3}), F.SectionError)


def test_apptainer_is_entered_with_exec_and_pyxis_not_at_all():
    req = probe_request(ContainerSpec("apptainer", image="/images/paddle.sif", gpus="all"),
                        "n1", 60)
    assert req["exec"] == ["apptainer", "exec", "--nv", "/images/paddle.sif"]
    assert "inspect" not in req and "start" not in req
    assert "exec" not in probe_request(ContainerSpec("pyxis", image="nvcr.io#x"), "n1", 60)
