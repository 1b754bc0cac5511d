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
