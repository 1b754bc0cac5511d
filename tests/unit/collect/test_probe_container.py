"""The probe's container part reads what a process really runs with through /proc/<pid>:
checked on real processes given other limits, another /dev/shm and another network
namespace than this one (unshare and prlimit, as a container runtime would)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from typing import Any

import pytest

from preflight.hostside.container import proc_environ, proc_limits, process_truth

ROOT = os.geteuid() == 0 and shutil.which("unshare") is not None

LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 1048576              files
Max locked memory         unlimited            unlimited            bytes
"""


def test_limits_and_environ_texts():
    assert proc_limits(LIMITS) == {"nofile": {"soft": 1024, "hard": 1048576},
                                   "memlock": {"soft": None, "hard": None}}
    assert proc_environ(b"A=1\0NVIDIA_VISIBLE_DEVICES=all\0BROKEN\0B=x=y\0") == {
        "A": "1", "NVIDIA_VISIBLE_DEVICES": "all", "B": "x=y"}


def test_this_process_reads_as_itself():
    got = process_truth(os.getpid())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert got["limits"]["nofile"] == {"soft": soft, "hard": hard}
    st = os.statvfs("/dev/shm")
    assert got["shm"]["size_bytes"] == st.f_blocks * st.f_frsize
    assert got["host_network"] is True and got["host_ipc"] is True


def _started(argv: list[str]) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the sleep runs (unshare has exec'd it)
        try:
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                if f.read().startswith(b"sleep"):
                    return p
        except FileNotFoundError:
            break
        time.sleep(0.02)
    p.kill()
    raise AssertionError(f"{argv} did not start: {p.communicate(timeout=5)}")


@pytest.mark.skipif(not ROOT, reason="needs root and unshare (CI has both)")
def test_a_process_in_its_own_namespaces_reads_as_it_runs():
    # Another network namespace, a 16 MiB /dev/shm of its own, a small memlock and a GPU
    # variable: what `podman run --network none --shm-size 16m --ulimit memlock=...` gives.
    script = "mount -t tmpfs -o size=16m tmpfs /dev/shm && exec sleep 30"
    p = _started(["prlimit", "--memlock=65536:65536", "--", "env",
                  "CUDA_VISIBLE_DEVICES=1", "FLAGS_check_nan_inf=1", "PADDLE_API_TOKEN=x",
                  "unshare", "--net", "--ipc", "--mount",
                  "--propagation", "private", "sh", "-c", script])
    try:
        got = process_truth(p.pid)
    finally:
        p.kill()
        p.communicate(timeout=10)
    assert got["host_network"] is False and got["host_ipc"] is False
    # Its training variables (a secret's value never read into the facts).
    assert got["env"]["vars"]["FLAGS_check_nan_inf"] == "1"
    assert got["env"]["vars"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert got["env"]["vars"]["PADDLE_API_TOKEN"] == "<redacted>"
    assert got["shm"]["size_bytes"] == 16 << 20  # its own, not this machine's /dev/shm
    assert got["limits"]["memlock"] == {"soft": 65536, "hard": 65536}
    assert got["gpu_env"] == {"CUDA_VISIBLE_DEVICES": "1"}
    assert got["infiniband"] == []


def test_what_inspect_says_was_asked_for_in_docker_and_podman_shapes():
    from preflight.hostside.container import intent

    # Docker's `docker run --gpus all --ipc host --device /dev/infiniband/uverbs0` (field
    # names and values as docs.docker.com documents HostConfig: DeviceRequests for --gpus).
    docker: dict[str, Any] = {"HostConfig": {
        "NetworkMode": "host", "IpcMode": "host", "ShmSize": 67108864,
        "Devices": [{"PathOnHost": "/dev/infiniband/uverbs0",
                     "PathInContainer": "/dev/infiniband/uverbs0",
                     "CgroupPermissions": "rwm"}],
        "DeviceRequests": [{"Driver": "", "Count": -1, "DeviceIDs": None,
                            "Capabilities": [["gpu"]], "Options": {}}]}}
    assert intent(docker) == {"network_mode": "host", "ipc_mode": "host",
                              "shm_size_bytes": 67108864,
                              "devices": ["/dev/infiniband/uverbs0"],
                              "gpu_requests": ["count=-1"]}
    # Podman lists no DeviceRequests; `--gpus '"device=0,1"'` in Docker names the IDs.
    docker["HostConfig"]["DeviceRequests"][0].update(Count=0, DeviceIDs=["0", "1"])
    assert intent(docker)["gpu_requests"] == ["0,1"]
    assert intent({"HostConfig": {"NetworkMode": "none", "Devices": []}}) == {
        "network_mode": "none", "ipc_mode": None, "shm_size_bytes": None, "devices": [],
        "gpu_requests": []}
