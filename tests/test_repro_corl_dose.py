"""Experiment B's analysis: the dose-response slope and the diverse-vs-copy comparison."""

from __future__ import annotations

import numpy as np
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


def test_the_report_plots_every_seed_and_decides_from_the_checks(tmp_path):
    from councilzoo.repro.report import combine_parts, write_report

    cells = _cells(lambda x: 0.1 * x - 0.02, copy_gain=0.0)
    jobs = [(c["partner"], c["seed"], corl_dose.QUICK, tmp_path) for c in cells]
    part = corl_dose.finish(jobs, cells, tmp_path, quick=True)
    assert (tmp_path / "corl_dose.png").stat().st_size > 0
    assert [r["seed"] for r in part["results"]["dose_per_seed"]] == [0, 1, 2, 3]
    result = combine_parts(corl_dose.CLAIM, {"dose": part}, {"quick": True})
    assert result["verdict"]["status"] == HELD
    write_report(tmp_path, result)
    assert "corl_dose.png" in (tmp_path / "report.md").read_text()


def test_power_from_a_pilot_is_the_paired_t_tests():
    from councilzoo.theory.stats import paired_power

    # slopes 0.1, 0.1 + 0.01 s: d = mean / sd of the per-seed slopes
    cells = [{**c, "final": c["final"] + (0.01 * c["seed"] * c["label_precision"] if c["partner"] != "copy"
                                          else 0.0)} for c in _cells(lambda x: 0.1 * x, copy_gain=0.0)]
    b1, b2 = corl_dose.power(cells, 8)
    slopes = [0.1 + 0.01 * s for s in range(4)]
    assert b1["per_seed"] == pytest.approx(slopes, abs=1e-4)
    d = np.mean(slopes) / np.std(slopes, ddof=1)
    assert b1["d"] == pytest.approx(d) and b1["power_at_8"] == pytest.approx(paired_power(d, 8))
    assert b1["seeds_for_80"] <= 8 and b2["check"] == "diverse_beats_copy_at_equal_skill"


def test_an_interrupted_run_is_read_back_for_the_seeds_that_finished(tmp_path):
    import json

    from councilzoo.repro.tiny_lms import addition_problems

    rl = addition_problems("rl")
    steps = corl_dose.FULL["steps"]
    for seed, last in ((0, steps), (1, steps), (2, steps // 2)):  # seed 2 stopped half-way
        for k, partner in enumerate(corl_dose.PARTNERS):
            run = tmp_path / f"{partner}-seed{seed}"
            (run / "run" / "members" / "m0").mkdir(parents=True)
            labeled = rl[:10]  # k + 1 of these labels right, the rest off by one
            rows = [{**p.to_dict(), "answer": p.answer if i <= k else str(int(p.answer) + 1)}
                    for i, p in enumerate(labeled)]
            (run / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            evals = [{"step": 0, "accuracy": 0.5}, {"step": last, "accuracy": 0.5 + 0.01 * k}]
            member = run / "run" / "members" / "m0"
            (member / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    cells = corl_dose.cells_from_runs(tmp_path, corl_dose.FULL)
    assert sorted({c["seed"] for c in cells}) == [0, 1]
    weak = next(c for c in cells if c["seed"] == 0 and c["partner"] == "weak")
    assert weak == {"partner": "weak", "seed": 0, "label_precision": 0.1, "label_coverage": 10 / len(rl),
                    "start": 0.5, "final": 0.5}
    assert next(c for c in cells if c["seed"] == 1 and c["partner"] == "copy")["label_precision"] == 0.5
