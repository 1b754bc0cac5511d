"""NVML's clock event (throttle) reasons: what the bits of the mask mean, whichever source read
it (nvmlDeviceGetCurrentClocksEventReasons, or nvidia-smi's clocks_event_reasons.active,
clocks_throttle_reasons before r535). Bits from nvml.h, nvmlClocksEventReason*.

The hardware ones are faults (a failing fan, a power supply asserting the brake); the software
ones are the driver keeping to a cap or a temperature target, which an idle but power-capped
GPU reads too. Idle (0x1) and the application clock settings are not slowdowns."""

from __future__ import annotations

from typing import Optional

HW_SLOWDOWN_BITS = {
    0x8: "hardware slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
SW_SLOWDOWN_BITS = {
    0x4: "software power cap",
    0x20: "software thermal slowdown",
}


def slowdowns(mask: Optional[int]) -> list[str]:
    """The slowdowns the mask names, the hardware ones first; [] for none (or not read)."""
    if not mask:
        return []
    return [text for bits in (HW_SLOWDOWN_BITS, SW_SLOWDOWN_BITS)
            for bit, text in bits.items() if mask & bit]
