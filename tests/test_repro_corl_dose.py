"""Experiment B's analysis: the dose-response slope and the diverse-vs-copy comparison."""

from __future__ import annotations

import pytest

from councilzoo.repro import corl_dose
from councilzoo.repro.verdicts import HELD, NOT_HELD


def _cells(gain_of, copy_gain, seeds=4):
    """Fake cells: partner p's label precision from a fixed ladder, gain from ``gain_of``."""
    ladder = {"weak": 0.3, "llama_b": 0.5, "strong": 0.7, "qwen_c": 0.8, "copy": 0.6}
    cells = []
    for s in range(seeds):
        for partner, precision in ladder.items():
            gain = copy_gain + 0.001 * s if partner == "copy" else gain_of(precision) + 0.001 * s
            cells.append({"partner": partner, "seed": s, "label_precision": precision, "label_coverage": 0.9,
                          "start": 0.5, "final": 0.5 + gain})
    return cells


def test_rising_gains_and_a_better_diverse_partner_hold():
    rows, checks = corl_dose.summarise(_cells(lambda x: 0.1 * x - 0.02, copy_gain=0.0))
    assert checks["gain_rises_with_partner_skill"]["value"][0] == pytest.approx(0.1)
    # at the copy's precision 0.6 the diverse partners' line gives 0.04, the copy 0.0
    assert checks["diverse_beats_copy_at_equal_skill"]["value"][0] == pytest.approx(0.04)
    assert {c["status"] for c in checks.values()} == {HELD}
    assert [r["partner"] for r in rows] == list(corl_dose.PARTNERS)


def test_flat_gains_and_a_better_copy_do_not_hold():
    _, checks = corl_dose.summarise(_cells(lambda x: 0.05 - 0.1 * x, copy_gain=0.2))
    assert checks["gain_rises_with_partner_skill"]["status"] == NOT_HELD
    assert checks["diverse_beats_copy_at_equal_skill"]["status"] == NOT_HELD


def test_the_arms_share_the_learner_and_differ_in_the_partner_only():
    assert corl_dose.PARTNERS["copy"] == (corl_dose.LEARNER, 0)
    assert all(view == 1 and name != corl_dose.LEARNER for name, view in corl_dose.DIVERSE.values())
    with pytest.raises(SystemExit):
        corl_dose.main(["--out", "x", "--seeds", "1"])
