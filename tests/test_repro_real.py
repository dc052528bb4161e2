"""``councilzoo repro real``'s statistics and pre-registered decision rule, on constructed hits."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.repro.real import (
    SMALLEST_EFFECT,
    decide,
    decide_registered,
    gain_share,
    paired_difference,
    summarise,
)


def _runs(start, finals, steps=(0, 2)):
    """Per-arm per-seed runs as ``run_arm`` returns them: hits items x evaluations."""
    return {arm: [{"steps": list(steps), "hits": np.stack([start, final], axis=1).tolist(),
                   "accuracy": [float(np.mean(start)), float(np.mean(final))]} for final in seeds]
            for arm, seeds in finals.items()}


def test_paired_difference_resamples_items_together():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 200).astype(float)
    mean, lo, hi = paired_difference(a, a)
    assert (mean, lo, hi) == (0.0, 0.0, 0.0)  # the same items drawn for both arms: no spread
    b = a.copy()
    b[:40] = 0  # b loses 40 items a may have had
    mean, lo, hi = paired_difference(a, b)
    assert mean == pytest.approx(a[:40].mean() * 40 / 200)
    assert 0 <= lo <= mean <= hi


def test_gain_share_is_the_ratio_of_gains():
    start = np.zeros(100)
    ceiling = np.r_[np.ones(40), np.zeros(60)]
    arm = np.r_[np.ones(20), np.zeros(80)]
    share, lo, hi = gain_share(arm, ceiling, start)
    assert share == pytest.approx(0.5)
    assert lo <= share <= hi


@pytest.mark.parametrize("seeds, outcome", [
    ([0.10, 0.02, 0.18], "HELD"),
    ([0.10, -0.02, 0.18], "INCONCLUSIVE"),  # spans 0
    ([-0.05, -0.10, -0.01], "NOT HELD"),  # excludes the paper's +1-point edge
    ([-0.04, -0.10, 0.01], "INCONCLUSIVE"),  # touches the edge: not excluded
    ([0.0, None, None], "INCONCLUSIVE"),  # one seed: no interval
])
def test_the_decision_rule_is_symmetric_about_the_papers_edge(seeds, outcome):
    got, reason = decide(seeds)
    assert got == outcome and "Co-RL - TTRL" in reason
    assert ("no interval" in reason) == (seeds[1] is None) and "nan" not in reason


def test_a_quick_verdict_says_it_is_a_pipeline_check():
    _, reason = decide([-0.1, -0.2, -0.05], quick=True)
    assert reason.startswith("PIPELINE CHECK, NOT EVIDENCE")


def test_the_registered_rule_of_2026_12_06_is_kept_for_the_record():
    assert decide_registered([0.0, -0.03, SMALLEST_EFFECT - 0.01], [0.0, -0.02, 0.02])[0] == "NOT HELD"
    assert decide_registered([0.1, 0.04, 0.16], [0.1, 0.02, 0.18])[0] == "HELD"
    assert decide_registered([0.03, -0.03, 0.09], [0.03, -0.01, 0.07])[0] == "INCONCLUSIVE"


def test_summarise_compares_the_arms_on_the_same_items():
    rng = np.random.default_rng(1)
    start = rng.integers(0, 2, 64)
    up = np.maximum(start, rng.integers(0, 2, 64))  # only gains
    runs = _runs(start, {"corl": [up, up], "ttrl": [start, start], "grpo": [np.ones(64), np.ones(64)]})
    rows, stats = summarise(runs)
    by_arm = {r["arm"]: r for r in rows}
    assert by_arm["ttrl"]["gain"] == 0.0 and by_arm["grpo"]["final_accuracy"] == 1.0
    diff = stats["corl_minus_ttrl_over_problems"]
    assert diff[0] == pytest.approx(up.mean() - start.mean()) and diff[1] > 0
    share = (up.mean() - start.mean()) / (1 - start.mean())
    assert stats["corl_share_of_grpo_gain"][0] == pytest.approx(share)
    assert decide(stats["corl_minus_ttrl_over_seeds"])[0] == "HELD"


def test_a_finished_run_is_read_back_and_a_changed_one_runs_again(tmp_path, monkeypatch):
    """An interrupted experiment resumes: a (arm, seed) run whose result.json was written for the
    same settings is read back; one written for other settings trains again."""
    import json

    from councilzoo.repro import real

    settings = dict(real.QUICK)
    saved = {"steps": [0, 2], "accuracy": [0.25, 0.5], "hits": [[0, 1]], "episodes_accuracy": 0.5}
    folder = tmp_path / "grpo-seed0"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps({"settings": settings, "result": saved}))
    ran = []
    monkeypatch.setattr(real, "run_arm", lambda *job: ran.append(job) or {})
    assert real._run_job(("grpo", 0, settings, tmp_path)) == saved and ran == []
    with pytest.raises(FileNotFoundError):  # other settings: trained again (the stand-in writes no members)
        real._run_job(("grpo", 0, {**settings, "steps": 3}, tmp_path))
    assert len(ran) == 1


def test_each_corl_member_is_reported_apart():
    start = np.r_[np.ones(8), np.zeros(8)]
    runs = _runs(start, {"corl": [start, start], "ttrl": [start, start], "grpo": [start, start]})
    for k, run in enumerate(runs["corl"]):
        run["member_accuracy"] = [[0.5, 0.40 + 0.02 * k], [0.5, 0.60 + 0.02 * k]]  # view 0, view 1
    rows, _ = summarise(runs)
    by_arm = {r["arm"]: r for r in rows}
    assert by_arm["corl member 0 (view 0)"]["final_accuracy"] == pytest.approx(0.41)
    assert by_arm["corl member 1 (view 1)"]["final_accuracy"] == pytest.approx(0.61)
    assert "ttrl member 0 (view 0)" not in by_arm  # one member: its row is the arm's
