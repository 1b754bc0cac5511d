"""What the probe is told to do with the job's container: the command lines that find its
image, start it as the job would be started, read it, enter it and remove it, all built
here (common.containercmd) so the probe on the host only runs them."""

from __future__ import annotations

import json
import secrets
from typing import Any

from preflight.common.containercmd import exec_argv, run_argv
from preflight.model.container import ContainerSpec

LINGER_S = 30  # beyond the probe's budget, a started container's own lifetime (it is --rm)


def probe_request(spec: ContainerSpec, host: str, budget: float) -> dict[str, Any]:
    """The probe's --container request for one host (see hostside/container.py)."""
    req: dict[str, Any] = {"runtime": spec.runtime, "image": spec.image, "name": spec.name,
                           "python": spec.python}
    t = spec.traits
    if not t.inspects:  # nothing started or read; its Paddle entered where a host can
        if t.entered_from_host:
            req.update(exec=run_argv(spec, []))
        return req
    rt = spec.runtime
    if spec.name is not None:  # a running container: entered, never started or removed
        req.update(id=[rt, "inspect", "--format", "{{.Image}}", spec.name],
                   inspect=[rt, "inspect", spec.name], exec=exec_argv(spec, []))
        return req
    assert spec.image is not None
    name = f"preflight-probe-{host}-{secrets.token_hex(4)}"
    # The job's own options, and a command that ends by itself: a probe that is killed
    # leaves a container that goes away (--rm) when its sleep does.
    start = run_argv(spec, ["sleep", str(int(budget) + LINGER_S)], name=name, detach=True)
    req.update(id=[rt, "image", "inspect", "--format", "{{.Id}}", spec.image], start=start,
               inspect=[rt, "inspect", name], exec=exec_argv(spec, [], container=name),
               rm=[rt, "rm", "--force", *t.rm_now, name])
    return req


def probe_arg(spec: ContainerSpec, host: str, budget: float) -> list[str]:
    """The probe's arguments for the container (one JSON argument, quoted like any other)."""
    return ["--container", json.dumps(probe_request(spec, host, budget), sort_keys=True)]
