"""The sampler as shipped: collect/probe/cgroup.py, watch/sampler_gpu.py and
watch/sampler_script.py joined into one text, and the one command that runs it on a host from
its command line (nothing is written there; a full or read-only /tmp cannot stop a watch)."""

from __future__ import annotations

import base64
import functools
import json
import shlex
import zlib
from dataclasses import dataclass
from importlib import resources
from typing import Optional

from preflight.collect.probe_text import part, without_joined_lines

MAIN_GUARD = 'if __name__ == "__main__":'
# The lines Paddle's examples, PaddleNLP's and PaddleClas's trainers print a step with
# ("step 10", "[Epoch 0, step 10]", "batch_id: 10", "iter: 10", "global_step: 10"); the user
# gives another with --step-pattern.
DEFAULT_STEP_PATTERN = r"(?i)\b(?:global_)?(?:step|iter|batch(?:_id)?)\b\s*[:=#]?\s*\[?\d+"


@dataclass(frozen=True)
class SamplerOptions:
    interval_s: float = 5.0
    lifetime_s: float = 3600.0  # the sampler ends by itself then, whatever the controller
    token: str = ""  # the launch marker of the job to follow; "": every Paddle job there
    step_pattern: Optional[str] = DEFAULT_STEP_PATTERN  # None: log lines are not counted
    # "driver": GPUs read only where the host has an NVIDIA driver; "always": tried anyway
    # (where NVML or nvidia-smi is found another way: the tests' stand-ins)
    gpu: str = "driver"


@functools.lru_cache(maxsize=1)
def shipped() -> str:
    """The one text: the cgroup part, the GPU part, then the sampler without its package
    imports."""
    watch = resources.files("preflight.watch")
    src = watch.joinpath("sampler_script.py").read_text()
    body, guard, entry = without_joined_lines(src).rpartition(MAIN_GUARD)
    if not guard:
        raise RuntimeError(f"sampler_script.py lost its {MAIN_GUARD!r} line")
    gpu = watch.joinpath("sampler_gpu.py").read_text()
    return f"{part('cgroup')}\n\n{gpu}\n\n{body}{guard}{entry}"


@functools.lru_cache(maxsize=1)
def _packed() -> str:
    return base64.b64encode(zlib.compress(shipped().encode(), 9)).decode()


BOOTSTRAP = ("import base64,sys,zlib;exec(compile(zlib.decompress(base64.b64decode("
             "sys.argv.pop(1))),'preflight-sampler','exec'))")


def command(python: str, opts: SamplerOptions) -> str:
    """The shell command that runs the sampler on a host with its python; every value
    quoted. -S: the sampler needs only the standard library; -u: each line leaves at once."""
    args = json.dumps({"interval": opts.interval_s, "lifetime": opts.lifetime_s,
                       "token": opts.token, "pattern": opts.step_pattern, "gpu": opts.gpu})
    run = " ".join(shlex.quote(a) for a in [python, "-S", "-u", "-c", BOOTSTRAP, _packed(),
                                            args])
    return "sh -c " + shlex.quote(f"exec {run}")

