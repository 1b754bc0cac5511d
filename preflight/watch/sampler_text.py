"""How the watch starts its sampler (hostside/sampler.py, joined and packed by hostside/ship.py):
its options, and the one command that runs it on a host from its command line (nothing is
written there; a full or read-only /tmp cannot stop a watch)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Optional

from preflight.hostside import ship

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


def command(python: str, opts: SamplerOptions) -> str:
    """The shell command that runs the sampler on a host with its python; every value
    quoted. -S: the sampler needs only the standard library; -u: each line leaves at once."""
    args = json.dumps({"interval": opts.interval_s, "lifetime": opts.lifetime_s,
                       "token": opts.token, "pattern": opts.step_pattern, "gpu": opts.gpu})
    run = shlex.join(ship.command_line(python, ship.sampler(), args))
    return "sh -c " + shlex.quote(f"exec {run}")

