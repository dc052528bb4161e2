"""COMED's gate: the decision rule, the controller in escalation-v0, and threshold fitting."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.agents.controllers.comed_gate import (
    ACCEPT,
    DIRECT_ESCALATE,
    PROBE_ACCEPT,
    PROBE_ESCALATE,
    PROBE_VERIFY,
    ComedController,
    ComedThresholds,
    GateOutcomes,
    fit_thresholds,
    gate_paths,
)
from councilzoo.agents.simulated import SimulatedAgent
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import synthetic_problems


def test_rule_takes_each_branch():
    t = ComedThresholds(tau_accept=0.8, delta=0.1, tau_direct=0.3, tau_escalate=0.6, delta_escalate=-0.2)
    c = np.array([1.0, 1.0, 0.2, 0.7, 0.7, 0.5, 0.7, 0.9])
    m = np.array([0.2, 0.0, 0.0, 0.0, 0.0, 0.0, -0.3, 0.5])
    present = np.array([1, 1, 1, 1, 1, 1, 1, 0], bool)
    agrees = np.array([0, 1, 0, 1, 0, 0, 0, 0], bool)
    expected = [
        ACCEPT,
        PROBE_ACCEPT,
        DIRECT_ESCALATE,
        PROBE_ACCEPT,
        PROBE_VERIFY,
        PROBE_ESCALATE,
        PROBE_ESCALATE,
        ACCEPT,
    ]
    assert gate_paths(t, c, m, present, agrees).tolist() == expected


def _play(thresholds: ComedThresholds, n: int = 40) -> list:
    problems = synthetic_problems("numeric", n, seed=3)
    agents = {
        "anchor": SimulatedAgent("a", 0.6, seed=1),
        "controller": ComedController(thresholds),
        "peer": SimulatedAgent("p", 0.6, seed=2),
        "verifier": SimulatedAgent("v", 0.7, seed=3),
    }
    engine = RolloutEngine(
        "councilzoo/escalation-v0", agents, 8, env_kwargs={"anchor_samples": 3}, progress=False
    )
    return engine.run(problems)


def test_controller_paths_follow_the_rule_in_the_env():
    t = ComedThresholds(tau_accept=1.0, tau_direct=0.4, tau_escalate=0.7)
    records = _play(t)
    names = {
        ACCEPT: "accept",
        PROBE_ACCEPT: "probe_accept",
        PROBE_VERIFY: "probe_verify",
        PROBE_ESCALATE: "probe_escalate",
        DIRECT_ESCALATE: "escalate",
    }
    for r in records:
        agrees = bool(r.info["probe_agrees"])
        path = gate_paths(t, r.info["consistency"], 0.0, False, agrees)
        assert names[int(path)] == r.info["path"]
    assert {r.info["path"] for r in records} >= {"accept", "probe_accept"}


def test_extreme_thresholds_give_single_and_dense():
    assert {r.info["path"] for r in _play(ComedThresholds(tau_accept=0.0), 10)} == {"accept"}
    dense = ComedThresholds(tau_accept=np.inf, tau_direct=np.inf)
    assert {r.info["path"] for r in _play(dense, 10)} == {"escalate"}


def _toy_outcomes(n: int = 200, seed: int = 0) -> GateOutcomes:
    """Anchor right iff consistency >= 0.6; verification always right at cost 3; debate right at 7."""
    rng = np.random.default_rng(seed)
    c = rng.choice([0.2, 0.4, 0.6, 0.8, 1.0], size=n)
    correct = np.zeros((n, 5), bool)
    correct[:, ACCEPT] = correct[:, PROBE_ACCEPT] = c >= 0.6
    correct[:, PROBE_VERIFY] = True
    correct[:, PROBE_ESCALATE] = correct[:, DIRECT_ESCALATE] = True
    cost = np.tile([1.0, 2.0, 3.0, 8.0, 7.0], (n, 1))
    return GateOutcomes(c, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), correct, cost)


def test_fit_finds_the_cheapest_perfect_rule():
    outcomes = _toy_outcomes()
    thresholds, scores = fit_thresholds(outcomes, lam=0.01)
    assert scores["accuracy"] == 1.0
    # accept exactly the consistent answers, verify the rest (cheaper than debate)
    c = outcomes.consistency
    assert scores["cost"] == pytest.approx(np.mean(np.where(c >= 0.6, 1.0, 3.0)))
    assert scores["escalation_rate"] == 0.0
    assert outcomes.evaluate(thresholds) == scores


def test_fit_respects_a_target_escalation_rate():
    outcomes = _toy_outcomes()
    outcomes.correct[:, PROBE_VERIFY] = False  # now only escalation rescues
    for target in (0.0, 0.1, 0.5):
        _, scores = fit_thresholds(outcomes, target_escalation_rate=target)
        assert scores["escalation_rate"] <= target + 1e-12
    with pytest.raises(ValueError, match="target_escalation_rate"):
        fit_thresholds(outcomes, target_escalation_rate=1.5)


def test_controller_refuses_an_illegal_mode_with_a_clear_error():
    from councilzoo.envs.escalation_v0 import FEATURE_NAMES
    from councilzoo.envs.types import Mode, TurnContext

    ctx = TurnContext(
        0, "controller", "controller", 0, None, (), (Mode.ACCEPT,), np.zeros(len(FEATURE_NAMES), np.float32)
    )
    with pytest.raises(ValueError, match="ComedController chose VERIFY"):
        ComedController(ComedThresholds(tau_accept=np.inf)).choose([ctx])
