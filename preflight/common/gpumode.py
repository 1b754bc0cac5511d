"""One vocabulary for a GPU's modes (ECC, MIG, persistence), whichever source read them: NVML
gives [current, pending] ints (1 enabled, 0 disabled) or one int, nvidia-smi gives "Enabled" or
"Disabled". Both become "enabled" or "disabled", with " (pending disabled)" when a change
waits for a reset, so a host read through NVML and one read through nvidia-smi compare alike
(a spelling is not a difference between hosts)."""

from __future__ import annotations

from typing import Any, Optional

WORDS = {1: "enabled", 0: "disabled", "enabled": "enabled", "disabled": "disabled",
         "1": "enabled", "0": "disabled"}


def word(v: Any) -> Optional[str]:
    """'enabled' / 'disabled' for what either source says; other text as it was, lower case;
    None for what is not reported."""
    if v is None:
        return None
    if isinstance(v, bool):
        v = int(v)
    key = v.strip().lower() if isinstance(v, str) else v
    if isinstance(key, str) and key in ("", "[n/a]", "n/a", "[not supported]"):
        return None
    found = WORDS.get(key)
    return found if found is not None else str(v).strip().lower()[:64]


def mode(v: Any) -> Optional[str]:
    """A mode as one word: NVML's [current, pending] pair (a pending change said), an int or
    nvidia-smi's text."""
    if isinstance(v, (list, tuple)):
        if not v:
            return None
        current = word(v[0])
        pending = word(v[1]) if len(v) > 1 else None
        if current is not None and pending is not None and pending != current:
            return f"{current} (pending {pending})"
        return current
    return word(v)


# NVSwitch fabric (nvmlDeviceGetGpuFabricInfo[V]): its state, the status Fabric Manager gave
# the GPU, and the health mask of the versioned call (nvml.h's NVML_GPU_FABRIC_* values).
FABRIC_STATES = {1: "not started", 2: "in progress", 3: "completed"}  # 0: no fabric
NVML_RETURNS = {3: "not supported", 4: "no permission", 6: "not found", 10: "timeout",
                15: "GPU is lost", 16: "reset required", 999: "unknown error"}
# (shift, what it means when that 2-bit field reads 1 = true, whether it fails). nvml.h gives
# the field widths as 0x11, which would mix in the next field's bits: each field holds 0-2, so
# 0x3 masks it. A fabric that still carries traffic, only slower or recovering, warns; an
# unhealthy route fails, as do a failed registration and a wrong configuration (below).
FABRIC_HEALTH = ((0, "bandwidth degraded", False), (2, "route recovery in progress", False),
                 (4, "route unhealthy", True), (6, "access timeout recovery in progress", False))
FABRIC_WARNINGS = frozenset(text for _, text, fails in FABRIC_HEALTH if not fails)
FABRIC_CONFIG = {2: "incorrect system GUID", 3: "incorrect chassis serial number",
                 4: "no partition", 5: "insufficient NVLinks", 6: "incompatible GPU firmware",
                 7: "invalid location"}


def fabric(state: int, status: int, health: int) -> tuple[Optional[str], tuple[str, ...]]:
    """The fabric's state as words (None: the GPU has no fabric) and what is wrong with it."""
    word = FABRIC_STATES.get(state)
    if word is None:
        return None, ()
    problems = []
    if word == "completed" and status != 0:
        problems.append(f"registration failed: {NVML_RETURNS.get(status, 'NVML error')} "
                        f"({status})")
    problems += [text for shift, text, _ in FABRIC_HEALTH if (health >> shift) & 0x3 == 1]
    config = FABRIC_CONFIG.get((health >> 8) & 0xF)
    if config:
        problems.append(f"incorrect configuration: {config}")
    return word, tuple(problems)
