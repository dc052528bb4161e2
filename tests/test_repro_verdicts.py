"""Three-valued verdicts: interval checks, preconditions, and which checks decide."""

from __future__ import annotations

import pytest

from councilzoo.repro.verdicts import (
    HELD,
    INCONCLUSIVE,
    NOT_HELD,
    check,
    conjunction,
    interval_status,
    part_status,
)


@pytest.mark.parametrize(
    "lo, hi, threshold, above, expected",
    [
        (0.01, 0.08, 0.0, True, HELD),
        (0.000, 0.085, 0.0, True, INCONCLUSIVE),  # Co-RL in its regime: a CI touching 0 decides nothing
        (-0.03, -0.01, 0.0, True, NOT_HELD),
        (-0.078, 0.006, -0.02, True, INCONCLUSIVE),  # TRACER's final accuracy: spans the tolerance
        (-0.05, -0.03, -0.02, True, NOT_HELD),
        (-3.0, -1.7, 0.0, False, HELD),  # fewer calls: the interval below 0
        (-0.5, 0.4, 0.0, False, INCONCLUSIVE),
        (float("nan"), float("nan"), 0.0, True, INCONCLUSIVE),  # not measured
    ],
)
def test_interval_status(lo, hi, threshold, above, expected):
    assert interval_status(lo, hi, threshold, above=above) == expected


def test_interval_status_refuses_a_reversed_interval():
    with pytest.raises(ValueError, match="lo <= hi"):
        interval_status(0.2, 0.1)


def test_conjunction_is_three_valued():
    assert conjunction([HELD, HELD]) == HELD
    assert conjunction([HELD, INCONCLUSIVE]) == INCONCLUSIVE
    assert conjunction([INCONCLUSIVE, NOT_HELD]) == NOT_HELD
    assert conjunction([]) == INCONCLUSIVE  # nothing tested the claim
    with pytest.raises(ValueError, match="unknown statuses"):
        conjunction(["held"])


def test_a_failed_precondition_is_inconclusive_whatever_the_other_checks_say():
    for paper in (HELD, NOT_HELD):
        checks = {"band": check("precondition", NOT_HELD, "in band", 0.544),
                  "gain": check("paper", paper, "gain above 0", [0.1, 0.0, 0.2])}
        assert part_status(checks) == INCONCLUSIVE


def test_only_the_papers_checks_decide():
    checks = {"gain": check("paper", HELD, "gain above 0"), "gate": check("extension", NOT_HELD, "gate")}
    assert part_status(checks) == HELD
    assert part_status({"gate": check("extension", HELD, "gate")}) == INCONCLUSIVE  # no paper check
    with pytest.raises(ValueError, match="kind"):
        check("mine", HELD, "x")
