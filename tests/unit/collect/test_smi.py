"""nvidia-smi CSV -> GpuFacts. The rows follow nvidia-smi's documented csv,noheader,nounits
layout (documented rows, not captured from a GPU machine)."""

from __future__ import annotations

import pytest

from preflight.collect.smi import SmiParseError, parse_smi_csv

FIELDS = ("index,name,uuid,memory.total,compute_cap,driver_version,vbios_version,"
          "ecc.mode.current,mig.mode.current,persistence_mode,power.limit,"
          "pcie.link.width.current,pcie.link.width.max")
ROW = ("{i}, NVIDIA H100 80GB HBM3, GPU-{i}, 81559, 9.0, 550.54.15, 96.00.99.00.01, Enabled, "
       "Disabled, Enabled, 700.00, 16, 16")


def test_rows_parse():
    facts = parse_smi_csv(FIELDS, "\n".join(ROW.format(i=i) for i in range(8)) + "\n")
    assert facts.source == "nvidia-smi" and facts.driver == "550.54.15"
    assert len(facts.devices) == 8
    d = facts.devices[3]
    assert (d.index, d.memory_total_mib, d.compute_capability) == (3, 81559, "9.0")
    assert d.power_limit_w == 700.0 and d.pcie_width == 16


def test_not_supported_values_become_none():
    row = "0, Tesla T4, GPU-0, 15360, 7.5, 535.104.05, [N/A], [N/A], [N/A], Disabled, " \
          "[Not Supported], 8, 16"
    d = parse_smi_csv(FIELDS, row).devices[0]
    assert d.vbios is None and d.mig_mode is None and d.power_limit_w is None
    assert (d.pcie_width, d.pcie_width_max) == (8, 16)


def test_basic_field_set_of_old_drivers():
    facts = parse_smi_csv("index,name,uuid,memory.total,driver_version",
                          "0, Tesla V100-SXM2-16GB, GPU-a, 16160, 470.82.01\n")
    assert facts.devices[0].compute_capability is None and facts.driver == "470.82.01"


@pytest.mark.parametrize("text,fragment", [
    ("0, A100\n", "columns"),
    (ROW.format(i="x"), "not a number"),
    (ROW.format(i=0) + "\n" + ROW.format(i=1).replace("550.54.15", "535.1"), "different drivers"),
], ids=["short-row", "bad-index", "two-drivers"])
def test_malformed_csv_raises(text, fragment):
    with pytest.raises(SmiParseError, match=fragment):
        parse_smi_csv(FIELDS, text)


def test_no_output_means_no_gpus():
    assert parse_smi_csv(FIELDS, "\n").devices == ()


HEALTH = (FIELDS + ",ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
          "remapped_rows.pending,remapped_rows.failure,clocks_event_reasons.active")
HEALTH_ROW = ROW + ", {ecc}, {retired}, {pending}, {failure}, {mask}"


def health_row(i: int = 0, ecc: str = "0", retired: str = "[N/A]", pending: str = "No",
               failure: str = "No", mask: str = "0x0000000000000001") -> str:
    return HEALTH_ROW.format(i=i, ecc=ecc, retired=retired, pending=pending, failure=failure,
                             mask=mask)


def test_health_reads_in_nvmls_terms():
    text = "\n".join([health_row(0, ecc="3", pending="Yes"),
                      health_row(1, retired="Yes", mask="0x0000000000000041")])
    apps = "GPU-1\nGPU-1\n"
    d0, d1 = parse_smi_csv(HEALTH, text, apps).devices
    assert (d0.ecc_uncorrected_volatile, d0.remapped_rows_pending, d0.retired_pages_pending,
            d0.clock_event_reasons, d0.processes) == (3, True, None, 0x1, 0)
    assert (d1.ecc_uncorrected_volatile, d1.retired_pages_pending, d1.remapped_rows_failure,
            d1.clock_event_reasons, d1.processes) == (0, True, False, 0x41, 2)


def test_the_older_name_of_the_clock_reasons_reads_the_same_mask():
    fields = HEALTH.replace("clocks_event_reasons", "clocks_throttle_reasons")
    d = parse_smi_csv(fields, health_row(mask="0x0000000000000008")).devices[0]
    assert d.clock_event_reasons == 0x8


def test_unreported_health_is_unknown_not_healthy():
    row = health_row(ecc="[N/A]", pending="[Insufficient Permissions]", failure="[N/A]",
                     mask="[Not Supported]")
    d = parse_smi_csv(HEALTH, row).devices[0]  # and no compute-apps answer
    assert (d.ecc_uncorrected_volatile, d.remapped_rows_pending, d.remapped_rows_failure,
            d.clock_event_reasons, d.processes) == (None, None, None, None, None)


@pytest.mark.parametrize("row,fragment", [
    (health_row(pending="Maybe"), "not Yes or No"),
    (health_row(mask="fast"), "not a bitmask"),
    (health_row(ecc="many"), "not a number"),
], ids=["yes-no", "mask", "ecc-count"])
def test_malformed_health_raises(row, fragment):
    with pytest.raises(SmiParseError, match=fragment):
        parse_smi_csv(HEALTH, row)
