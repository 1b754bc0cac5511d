"""Closed sets of values read back: narrowed to their member, or refused naming the set."""

from __future__ import annotations

import pytest

from preflight.common.literal import one_of
from preflight.model.measure import RUN_OUTCOMES, SCHEDULES


def test_a_member_is_returned_as_the_member():
    assert one_of("matrix", SCHEDULES) == "matrix"
    assert one_of("out-of-time", RUN_OUTCOMES) == "out-of-time"


@pytest.mark.parametrize("value", ["mesh", "", None, 1, "RING"])
def test_anything_else_is_refused_naming_the_set(value):
    with pytest.raises(ValueError, match="is not one of ring, matrix"):
        one_of(value, SCHEDULES)
