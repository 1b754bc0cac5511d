"""The command lines that start the job's container: one argv per runtime, each value one
argument (never a shell word), GPUs passed as each runtime takes them."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import replace

import pytest

from preflight.common.containercmd import command, exec_argv, pyxis_options, run_argv
from preflight.model.container import ContainerSpec

JOB = ContainerSpec("docker", image="paddle:3.3.1", network="host", shm_size="16g",
                    cpus="7.5", cpuset="0-7", memory="64g",
                    ulimits=(("memlock", "-1"), ("nofile", "65536:65536")),
                    devices=("/dev/infiniband",), mounts=("/data:/data:ro",),
                    env=(("NCCL_DEBUG", "WARN"),), gpus="all")


def test_docker_run_carries_every_option_before_the_image():
    argv = run_argv(JOB, ["python3", "-c", "print(1)"], name="pf-ab12-node01")
    assert argv == [
        "docker", "run", "--rm", "--name", "pf-ab12-node01", "--network", "host",
        "--shm-size", "16g", "--cpus", "7.5", "--cpuset-cpus", "0-7", "--memory", "64g",
        "--ulimit", "memlock=-1", "--ulimit", "nofile=65536:65536", "--gpus", "all",
        "--device", "/dev/infiniband", "--volume", "/data:/data:ro", "--env",
        "NCCL_DEBUG=WARN", "paddle:3.3.1", "python3", "-c", "print(1)"]


@pytest.mark.parametrize("ipc", ["host", "container:trainer"])
def test_on_a_shared_ipc_namespace_shm_size_is_not_passed(ipc):
    # Podman refuses --shm-size beside --ipc host ("cannot set shmsize when running in the
    # host IPC Namespace"); the container's /dev/shm is the host's (or the other's) then.
    argv = run_argv(replace(JOB, ipc=ipc, runtime="podman"), ["true"])
    assert ["--ipc", ipc] == argv[argv.index("--ipc"):argv.index("--ipc") + 2]
    assert "--shm-size" not in argv
    assert "--shm-size" in run_argv(replace(JOB, ipc="private"), ["true"])


def test_limits_go_to_apptainer_and_not_to_pyxis():
    app = run_argv(replace(JOB, runtime="apptainer"), ["true"])
    assert app[app.index("--cpus"):app.index("--cpus") + 6] == [
        "--cpus", "7.5", "--cpuset-cpus", "0-7", "--memory", "64g"]
    # Under pyxis the Slurm step's --cpus-per-task and --mem are the limits.
    assert "--cpus" not in run_argv(replace(JOB, runtime="pyxis"), ["true"])


@pytest.mark.parametrize("runtime, gpus, args", [
    ("docker", "all", ["--gpus", "all"]),
    ("docker", "0", ["--gpus", "device=0"]),
    # Docker reads --gpus as CSV: a list of devices must be quoted inside the value.
    ("docker", "0,1", ["--gpus", '"device=0,1"']),
    ("podman", "all", ["--device", "nvidia.com/gpu=all"]),
    ("podman", "0,GPU-5d3", ["--device", "nvidia.com/gpu=0", "--device",
                             "nvidia.com/gpu=GPU-5d3"]),
    ("apptainer", "all", ["--nv"]),
    ("apptainer", "2,3", ["--nv", "--env", "CUDA_VISIBLE_DEVICES=2,3"]),
])
def test_gpus_as_each_runtime_takes_them(runtime, gpus, args):
    argv = run_argv(ContainerSpec(runtime, image="img", gpus=gpus), ["true"])
    i = argv.index("img")
    assert " ".join(args) in " ".join(argv[:i]), argv


def test_no_gpus_asked_is_no_gpu_option():
    argv = run_argv(ContainerSpec("docker", image="img"), ["true"])
    assert argv == ["docker", "run", "--rm", "img", "true"]


def test_detached_and_interactive_starts():
    spec = ContainerSpec("podman", image="img", network="host")
    assert run_argv(spec, ["sleep", "60"], name="pf-1", detach=True)[:6] == [
        "podman", "run", "--detach", "--rm", "--name", "pf-1"]
    assert run_argv(spec, ["python3", "-"], stdin=True)[:4] == [
        "podman", "run", "--rm", "--interactive"]


def test_a_running_container_is_entered_not_started():
    spec = ContainerSpec("docker", name="trainer", env=(("A", "1"),))
    assert run_argv(spec, ["python3", "-"], stdin=True) == [
        "docker", "exec", "--interactive", "--env", "A=1", "trainer", "python3", "-"]
    started = ContainerSpec("podman", image="img")
    assert exec_argv(started, ["id"], container="pf-1") == ["podman", "exec", "pf-1", "id"]
    assert exec_argv(ContainerSpec("apptainer", name="dev"), ["id"]) == [
        "apptainer", "exec", "instance://dev", "id"]


def test_pyxis_is_an_srun_step_with_the_container_flags():
    spec = ContainerSpec("pyxis", image="nvcr.io#nvidia/paddle:24.01", mounts=("/d:/d",),
                         env=(("NCCL_DEBUG", "INFO"),), gpus="all")
    assert pyxis_options(spec) == ["--container-image=nvcr.io#nvidia/paddle:24.01",
                                   "--container-mounts=/d:/d"]
    assert run_argv(spec, ["python3", "-V"]) == [
        "srun", "--container-image=nvcr.io#nvidia/paddle:24.01", "--container-mounts=/d:/d",
        "--ntasks=1", "env", "NCCL_DEBUG=INFO", "python3", "-V"]
    assert pyxis_options(ContainerSpec("pyxis", name="job1")) == ["--container-name=job1"]


def test_a_hostile_value_stays_one_argument_through_a_shell():
    spec = ContainerSpec("docker", image="img; touch /tmp/pwned",
                         env=(("X", "$(id) `id` 'q'"),), mounts=("/a b:/c",))
    line = command(run_argv(spec, ["echo", "ok"]))
    assert shlex.split(line) == run_argv(spec, ["echo", "ok"])
    # The real shell agrees: each value arrives whole, nothing runs.
    out = subprocess.run(["sh", "-c", "printf '%s\\n' " + line], capture_output=True,
                         text=True, timeout=10, check=True).stdout.splitlines()
    assert out == run_argv(spec, ["echo", "ok"])


def test_a_new_runtime_is_one_row(monkeypatch):
    # nerdctl, containerd's Docker-compatible command: a row like Docker's is all it takes
    # for the reader, the command lines, the probe's request and the launch script.
    from preflight.collect.container import probe_request
    from preflight.config.container import layer, spec_of
    from preflight.config.document import Fields
    from preflight.model import container as model
    from preflight.model.plan import Node, Plan
    from preflight.model.policy import JobShape
    from preflight.placement.launcher import script

    monkeypatch.setitem(model.RUNTIME_TRAITS, "nerdctl", model.RUNTIME_TRAITS["docker"])
    spec = spec_of("inv.yaml", [layer(Fields("inv.yaml", {"runtime": "nerdctl",
                                                           "image": "paddle:3.3.1",
                                                           "gpus": "0,1"}, "container"))])
    assert spec is not None and spec.runtime == "nerdctl"
    argv = run_argv(spec, ["true"])
    assert argv[:3] == ["nerdctl", "run", "--rm"] and '"device=0,1"' in argv
    req = probe_request(spec, "n1", 60)
    assert req["start"][:2] == ["nerdctl", "run"] and req["inspect"][0] == "nerdctl"
    node = Node("n1", "10.0.0.1", "python3", 0, 1, (6070,), ("python3", "-m",
                "paddle.distributed.launch"), (), container=spec)
    text = script(Plan("collective", JobShape(), nodes=(node,)), node)
    assert "exec nerdctl run --rm --name paddle-job-n1" in text, text
