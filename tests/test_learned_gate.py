"""Learned escalation gates (comed_learned, comed_regret): dev-only fits, determinism, demo scores."""

from __future__ import annotations

import json

import numpy as np
import pytest

from councilzoo.agents.controllers.comed_gate import (
    ACCEPT,
    DIRECT_ESCALATE,
    PROBE_ACCEPT,
    PROBE_ESCALATE,
    PROBE_VERIFY,
    GateOutcomes,
)
from councilzoo.agents.controllers.learned_gates import FEATURES, LogisticGate, RegretGate, learned_paths
from councilzoo.config import load_config
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.demo import DEMO_COUNCIL, DEMO_SIZE
from councilzoo.evaluation.harness import Evaluation
from councilzoo.tasks import load_problems, synthetic_problems
from councilzoo.testing.gates import check_gate

LEARNED = ("comed_learned", "comed_regret")


def _evaluation(test_seed: int = 0, n: int = 60, out=None) -> Evaluation:
    council = load_config({**DEMO_COUNCIL, "comed": {**DEMO_COUNCIL["comed"], "dev_size": n}}, CouncilConfig)
    test = synthetic_problems("numeric", n, seed=test_seed)
    dev = synthetic_problems("numeric", n, seed=10_000)
    return Evaluation(council, test, dev, out, progress=False)


def _toy(correct: np.ndarray, cost=(1.0, 2.0, 3.0, 4.0, 4.0), features=None) -> GateOutcomes:
    """Outcomes of ``len(correct)`` problems with the given per-path correctness ``(n, 5)``."""
    n = len(correct)
    x = np.zeros((n, len(FEATURES))) if features is None else features
    return GateOutcomes(
        consistency=x[:, 0],
        margin=np.zeros(n),
        margin_present=np.zeros(n, dtype=bool),
        probe_agrees=np.zeros(n, dtype=bool),  # every probe disagrees
        correct=np.asarray(correct, dtype=bool),
        cost=np.tile(np.asarray(cost, float), (n, 1)),
        features=x,
    )


def test_fits_read_dev_episodes_only_and_do_not_depend_on_the_test_set(tmp_path):
    ev = _evaluation(out=tmp_path)
    for name in LEARNED:
        ev.result(name)
    dev_ids, test_ids = {p.id for p in ev.dev}, {p.id for p in ev.test}
    for path in (tmp_path / "episodes").glob("dev_comed_*.jsonl"):
        ids = {json.loads(line)["problem_id"] for line in path.read_text().splitlines()}
        assert ids == dev_ids and not ids & test_ids, path.name
    other = _evaluation(test_seed=1)  # same dev problems, other test problems
    x = ev.comed_outcomes.features
    assert np.array_equal(x, other.comed_outcomes.features)
    for gate in (LogisticGate(0.02), RegretGate(0.02)):
        a, b = gate.fit(ev.comed_outcomes).gate_scores(x), gate.fit(other.comed_outcomes).gate_scores(x)
        assert np.array_equal(a, b), type(gate).__name__


def test_learned_gates_are_deterministic():
    first, second = _evaluation(), _evaluation()
    for name in LEARNED:
        a, b = first.result(name), second.result(name)
        assert np.array_equal(a.correct, b.correct) and np.array_equal(a.calls, b.calls), name
        assert a.summary()["paths"] == b.summary()["paths"], name


@pytest.mark.parametrize("name", LEARNED)
def test_on_the_demo_council_beats_accepting_and_costs_less_than_debate(name):
    council = load_config(DEMO_COUNCIL, CouncilConfig)
    test = load_problems("synthetic:numeric", "test", seed=0, limit=DEMO_SIZE)
    dev = load_problems("synthetic:numeric", "dev", seed=0, limit=council.comed.dev_size)
    rows = {r["protocol"]: r for r in Evaluation(council, test, dev, progress=False).rows(
        ["single", "self_consistency", "debate", name]
    )}
    gate = rows[name]
    assert gate["accuracy"] >= max(rows["single"]["accuracy"], rows["self_consistency"]["accuracy"])
    assert gate["calls"] < rows["debate"]["calls"] and gate["tokens"] < rows["debate"]["tokens"]
    assert gate["harm"] < rows["debate"]["harm"]


@pytest.mark.parametrize("gate", [LogisticGate(0.02), RegretGate(0.02, iterations=100)],
                         ids=["logistic", "regret"])
def test_fitted_on_any_dev_table_the_gates_decide_legally_at_both_steps(gate):
    """Fitted on generated dev tables (absent classes, no router, every probe agreeing ...), each
    gate plays escalation-v0 to a legal decision after the anchor and after the probe; neither
    claims monotonicity in a signal, so none is checked."""
    check_gate(gate, fit=True, after_probe="all")


def test_regret_gate_converges_to_the_best_path_of_a_cell():
    # one cell: accepting is right 30% of the time, escalating at once always, and after a
    # (always disagreeing) probe, verifying beats accepting and escalating
    n = 10
    correct = np.zeros((n, 5), dtype=bool)
    correct[:3, ACCEPT] = correct[:3, PROBE_ACCEPT] = True
    correct[:, DIRECT_ESCALATE] = True
    correct[:8, PROBE_VERIFY] = True
    correct[:5, PROBE_ESCALATE] = True
    gate = RegretGate(lam=0.02).fit(_toy(correct))
    x = np.zeros((1, len(FEATURES)))
    # escalate (1 - 0.08) beats accept (0.3 - 0.02) and the probe, then verify (0.8 - 0.06)
    assert gate.gate_scores(x)[0, 2] > 0.95
    assert gate.after_probe_scores(x)[0, 1] > 0.95  # verify
    assert learned_paths(gate, x, np.array([False]))[0] == DIRECT_ESCALATE
    cheaper = RegretGate(lam=0.5).fit(_toy(correct))  # at 0.5 per call accepting wins
    assert cheaper.gate_scores(x)[0, 0] > 0.95


def test_logistic_gate_escalates_where_the_anchor_is_predicted_wrong():
    n = 40
    low = np.arange(n) < n // 2  # low consistency: the anchor is wrong and debate right
    x = np.zeros((n, len(FEATURES)))
    x[:, 0] = np.where(low, 1 / 3, 1.0)
    correct = np.zeros((n, 5), dtype=bool)
    correct[:, ACCEPT] = correct[:, PROBE_ACCEPT] = ~low
    correct[:, DIRECT_ESCALATE] = correct[:, PROBE_ESCALATE] = True
    paths = learned_paths(LogisticGate(0.1).fit(_toy(correct, features=x)), x, np.zeros(n, dtype=bool))
    assert np.all(paths[~low] == ACCEPT)
    assert np.all(np.isin(paths[low], (DIRECT_ESCALATE, PROBE_ESCALATE)))
