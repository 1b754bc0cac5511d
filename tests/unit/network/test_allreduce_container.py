"""The all-reduce where the job runs in a container: the launcher runs in the job's
container, started as the job's, with the run directory shared so that the script goes in
and the ranks' progress comes out; the host's own python unpacks the script."""

from __future__ import annotations

import shlex

from preflight.model.container import ContainerSpec
from preflight.network.allreduce_cmd import AllReduceOptions, host_command
from preflight.network.paddle_job import Member

SPEC = ContainerSpec("podman", image="localhost/paddle:3.3.1", network="host",
                     shm_size="2g", mounts=("/data:/data",))


class NoRemote:
    pass


def test_the_launcher_runs_in_the_container_with_the_run_directory_shared():
    run_dir = "/tmp/.preflight-ar-0123abcd-0"
    m = Member("n1", NoRemote(), "/opt/paddle/bin/python", "10.0.0.1",  # type: ignore[arg-type]
               container=SPEC, host_python="python3")
    script = shlex.split(host_command(m, 0, [m], AllReduceOptions(), run_dir))[2]
    unpack = [ln for ln in script.splitlines() if "allreduce.py" in ln and "-c" in ln][0]
    assert unpack.startswith("python3 -c ")  # /opt/paddle/bin/python is the container's
    launch = [ln for ln in script.splitlines() if "paddle.distributed.launch" in ln][0]
    argv = shlex.split(launch.split("timeout -k 3 ", 1)[1].split(" > ", 1)[0])[1:]
    assert argv[:5] == ["podman", "run", "--rm", "--name", "preflight-ar-0123abcd-0"]
    volumes = [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"]
    assert volumes == ["/data:/data", f"{run_dir}:{run_dir}"]
    inside = argv[argv.index("localhost/paddle:3.3.1") + 1:]
    assert inside[0] == "env" and "/opt/paddle/bin/python" in inside
    assert inside[inside.index("--host") + 1] == "10.0.0.1"
    assert f"{run_dir}/allreduce.py" in inside
