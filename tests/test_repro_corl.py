"""``councilzoo repro corl``: the simulated companion's dynamics, and a --quick run's report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from councilzoo.learners.cohort import DataConfig
from councilzoo.repro import corl, corl_sim
from councilzoo.repro.corl_sim import SimConfig, initial_logits, train

SMALL = SimConfig(problems=24, steps=25)


def test_error_correlation_knob_controls_shared_mistakes():
    modes = {rho: initial_logits(SMALL, rho, np.random.default_rng(1)).argmax(-1) for rho in (0.0, 1.0)}
    wrong = modes[1.0] != 0
    assert (modes[1.0] == modes[1.0][0]).all()  # rho = 1: every member errs alike
    assert set(np.unique(modes[1.0][wrong])) <= {1}  # ... on the shared distractor
    assert (modes[0.0][modes[0.0] != 0] != 1).all()  # rho = 0: never on the shared one


def test_simulated_rules_behave_as_their_definitions_say():
    gt = train(SMALL, "ground_truth", 0.0, seed=0)
    assert gt["accuracy"] == 1.0 and gt["collapse"] < gt["start_collapse"]  # gold labels fix all
    ttrl = train(SMALL, "self_majority", 0.0, seed=0)
    assert abs(ttrl["accuracy"] - ttrl["start_accuracy"]) <= 0.05  # own majority keeps the argmax...
    assert ttrl["collapse"] > ttrl["start_collapse"]  # ... it sharpens the wrong ones: collapse
    peer = train(SMALL, "peer_majority", 0.0, seed=0)
    assert peer["accuracy"] > ttrl["accuracy"] and peer["collapse"] < ttrl["collapse"]


def test_peer_rewards_lose_their_edge_when_errors_coincide():
    runs = {rho: [train(SMALL, "ring", rho, seed) for seed in range(2)] for rho in (0.0, 1.0)}
    gain = {rho: np.mean([r["accuracy"] - r["start_accuracy"] for r in rs]) for rho, rs in runs.items()}
    assert gain[0.0] > corl.TIP_GAIN > gain[1.0]


def test_sim_summary_reports_tipping_points():
    cfg = SimConfig(problems=12, steps=15, correlations=(0.0, 1.0))
    table, tips = corl.summarise_sim(corl_sim.sweep(cfg, 2), cfg)
    assert {(t["rule"], t["rho"]) for t in table} == {(r, rho) for r in corl_sim.RULES for rho in (0.0, 1.0)}
    for rule, tip in tips.items():
        gains = {t["rho"]: t["gain"] for t in table if t["rule"] == rule}
        assert tip == min((rho for rho, g in gains.items() if g < corl.TIP_GAIN), default=None)


@pytest.mark.slow
def test_quick_run_writes_a_report_whose_verdict_follows_from_its_numbers(quick_repro):
    out = quick_repro / "corl"
    report = result = json.loads((out / "report.json").read_text())
    assert set(report) >= {"claim", "setup", "results", "verdict", "figures", "run"}
    assert all((out / f).is_file() for f in report["figures"])
    assert "NOT HELD" in (out / "report.md").read_text() or "HELD" in (out / "report.md").read_text()

    runs = json.loads((out / "curves.json").read_text())
    assert set(runs) == set(corl.ARMS) and all(len(seeds) == 2 for seeds in runs.values())
    # seeds change the data order and the samples, so the curves differ between seeds
    for seeds in runs.values():
        assert seeds[0]["wrong_consensus"] != seeds[1]["wrong_consensus"] or \
            seeds[0]["label_accuracy"] != seeds[1]["label_accuracy"]
    # the verdict is recomputed from the stored curves
    rows, checks = corl.summarise_lm(runs)
    assert result["verdict"]["held"] == all(c["held"] for c in checks.values())
    assert [r["final_accuracy"] for r in rows] == [r["final_accuracy"] for r in result["results"]["arms"]]
    # supervised GRPO's pseudo-labels are the gold answers
    grpo = next(r for r in rows if r["arm"] == "grpo")
    assert grpo["label_accuracy"] == 1.0


@pytest.mark.slow
def test_an_arm_run_in_this_process_matches_the_pooled_run(quick_repro, tmp_path):
    # The report's arms ran in spawned worker processes; one arm and seed replayed here must give
    # the same curves, so results never depend on --jobs or on which worker ran what.
    out = quick_repro / "corl"
    pooled = json.loads((out / "curves.json").read_text())
    data = DataConfig(dataset="jsonl", path=str(out / "rl_items.jsonl"))
    here = corl._run_job(("corl_heterogeneous", 1, corl.QUICK, data, tmp_path))
    assert set(here) == set(pooled["corl_heterogeneous"][1])
    for name, curve in here.items():
        np.testing.assert_array_equal(curve, pooled["corl_heterogeneous"][1][name], err_msg=name)
