"""The command lines that start a job's container, or enter a running one: one builder for
the probe, the all-reduce and the plan's launch commands, so that what preflight checks is
started exactly as the job will be.

Every function returns an argv (a list of arguments); a value of the spec is always one
argument, so nothing from an inventory reaches a shell unquoted (command() joins with
shlex for a shell or a script)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Optional

from preflight.model.container import ContainerSpec
from preflight.model.plan import Node


def _gpu_args(spec: ContainerSpec) -> list[str]:
    """The GPUs passed as each runtime takes them: Docker's --gpus (its CSV parser needs
    device lists quoted: '"device=0,1"'), CDI devices for Podman (nvidia.com/gpu=...),
    --nv for Apptainer (all GPUs; CUDA_VISIBLE_DEVICES narrows them). Under pyxis the GPUs
    are the Slurm step's (its --gres), so there is nothing to add."""
    gpus, style = spec.gpus, spec.traits.gpus
    if gpus is None or style == "step":
        return []
    ids = [g.strip() for g in gpus.split(",") if g.strip()]
    if style == "docker":
        if gpus == "all":
            return ["--gpus", "all"]
        return ["--gpus", f'"device={",".join(ids)}"' if len(ids) > 1 else f"device={ids[0]}"]
    if style == "cdi":
        return [a for g in (["all"] if gpus == "all" else ids)
                for a in ("--device", f"nvidia.com/gpu={g}")]
    return ["--nv"] + ([] if gpus == "all" else ["--env", f"CUDA_VISIBLE_DEVICES={gpus}"])


def _limit_args(spec: ContainerSpec) -> list[str]:
    """Its CPU and memory limits, under the flags Docker, Podman and Apptainer share. Under
    pyxis they are the Slurm step's (--cpus-per-task, --mem): nothing to add."""
    if not spec.traits.limits:
        return []
    out: list[str] = []
    for flag, value in (("--cpus", spec.cpus), ("--cpuset-cpus", spec.cpuset),
                        ("--memory", spec.memory)):
        if value:
            out += [flag, value]
    return out


def _engine_options(spec: ContainerSpec) -> list[str]:
    """docker/podman run options of the spec, in a fixed order."""
    out: list[str] = []
    if spec.network:
        out += ["--network", spec.network]
    if spec.ipc:
        out += ["--ipc", spec.ipc]
    if spec.shm_size and spec.private_ipc:  # else the host's /dev/shm (the shm check says so)
        out += ["--shm-size", spec.shm_size]
    out += _limit_args(spec)
    for name, value in spec.ulimits:
        out += ["--ulimit", f"{name}={value}"]
    out += _gpu_args(spec)
    for d in spec.devices:
        out += ["--device", d]
    for m in spec.mounts:
        out += ["--volume", m]
    for k, v in spec.env:
        out += ["--env", f"{k}={v}"]
    return out


def pyxis_options(spec: ContainerSpec) -> list[str]:
    """srun's options for the job's steps under pyxis (Slurm's --container-* flags)."""
    out = ([f"--container-name={spec.name}"] if spec.name is not None
           else [f"--container-image={spec.image}"])
    if spec.mounts:
        out.append(f"--container-mounts={','.join(spec.mounts)}")
    return out


def _env_prefix(spec: ContainerSpec) -> list[str]:
    return ["env", *(f"{k}={v}" for k, v in spec.env)] if spec.env else []


def run_argv(spec: ContainerSpec, argv: Sequence[str], name: Optional[str] = None,
             detach: bool = False, stdin: bool = False,
             env_file: Optional[str] = None) -> list[str]:
    """Runs argv in the job's container: a new one from the image (removed when argv ends;
    detach: left running in the background, to be inspected and entered), or, for a spec
    naming a running container, inside that one. name: the new container's name (the
    probe's, the all-reduce's, a launch's), which is how preflight finds it to stop it.
    stdin: argv reads standard input (the probe's payload). env_file: a KEY=value file whose
    variables are set inside (docker and podman)."""
    if spec.running:
        return exec_argv(spec, argv, stdin)
    assert spec.image is not None
    shape = spec.traits.shape
    if shape == "pyxis":
        return ["srun", *pyxis_options(spec), "--ntasks=1", *_env_prefix(spec), *argv]
    if shape == "apptainer":
        return [spec.runtime, "exec", *_gpu_args(spec), *_limit_args(spec),
                *(a for m in spec.mounts for a in ("--bind", m)),
                *(a for k, v in spec.env for a in ("--env", f"{k}={v}")), spec.image, *argv]
    # Detached, it is removed all the same when its command ends: a probe that is killed
    # leaves nothing behind once the command's own time is up.
    head = [spec.runtime, "run", *(["--detach"] if detach else []), "--rm"]
    if stdin and not detach:
        head.append("--interactive")
    if name:
        head += ["--name", name]
    files = ["--env-file", env_file] if env_file else []
    return [*head, *_engine_options(spec), *files, spec.image, *argv]


def exec_argv(spec: ContainerSpec, argv: Sequence[str], stdin: bool = False,
              container: Optional[str] = None) -> list[str]:
    """Runs argv inside a running container: the spec's own, or container (one preflight
    started detached). The job's environment is the container's, plus the spec's env."""
    target = container or spec.name
    assert target is not None
    shape = spec.traits.shape
    if shape == "pyxis":
        return ["srun", f"--container-name={target}", "--ntasks=1", *_env_prefix(spec), *argv]
    if shape == "apptainer":
        return [spec.runtime, "exec", *(a for k, v in spec.env for a in ("--env", f"{k}={v}")),
                f"instance://{target}", *argv]
    return [spec.runtime, "exec", *(["--interactive"] if stdin else []),
            *(a for k, v in spec.env for a in ("--env", f"{k}={v}")), target, *argv]


def command(argv: Sequence[str]) -> str:
    """argv as one shell command line, every argument quoted."""
    return shlex.join(argv)


def node_argv(node: Node, script: Sequence[str] = (), env: Sequence[str] = (),
              name: Optional[str] = None) -> list[str]:
    """A plan host's launcher run in the job's container, started as the job's: the
    launcher's variables set inside, env (more NAME=value, a launch's marker) too."""
    assert node.container is not None
    inner = ["env", *env, *(f"{k}={v}" for k, v in node.flag_env()), *node.argv, *script]
    return run_argv(node.container, inner, name=name or f"paddle-job-{node.host}")


def node_command(node: Node, script: Sequence[str] = ()) -> str:
    """A plan host's command line: the launcher, or its container run where the job runs in
    one."""
    return node.command(script) if node.container is None else command(node_argv(node, script))
