"""Experiment A's yardstick: the exact team-optimal speak/skip policy of simulated review-v0."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.config import load_config
from councilzoo.learners.tracer.config import TracerConfig
from councilzoo.learners.tracer.learner import Tracer
from councilzoo.repro import team_optimal as T

POOL = {"proposer": {"skill": 0.5, "swayed_prob": 0.4},
        "reviewer": {"skill": 0.6, "catch_prob": 0.85, "false_alarm_prob": 0.15}}


@pytest.fixture(scope="module")
def setup():
    cfg = load_config({"seed": 3, "max_steps": 3, "problems_per_step": 16, "env": {"lam": 0.03},
                       "agents": {"simulated": POOL}, "data": {"synthetic_size": 24, "eval_limit": 24}},
                      TracerConfig)
    tracer = Tracer(cfg)
    problems = tracer.eval_sets["synthetic:numeric"]
    return tracer, problems, T.build_tree(tracer, problems)


def _evaluate(tracer, problems, table) -> float:
    tracer.engine.reset_seeds()
    policy = T.TablePolicy({role: table[r] for r, role in enumerate(T.ROLES)}, tracer.state_fn)
    return tracer.evaluate(problems, policy)["objective"]


def test_a_policys_value_on_the_tree_is_its_value_when_played(setup):
    tracer, problems, tree = setup
    rng = np.random.default_rng(0)
    tables = rng.integers(0, 2, size=(4, 2, tree.num_states)).astype(np.int8)
    values = T.policy_values(tree, tables)
    for table, value in zip(tables, values, strict=True):
        assert value == pytest.approx(_evaluate(tracer, problems, table), abs=1e-12)


def test_the_team_optimum_beats_every_policy_and_no_role_can_improve_it(setup):
    tracer, problems, tree = setup
    v_star, best = T.team_optimum(tree)
    assert v_star == pytest.approx(_evaluate(tracer, problems, best), abs=1e-12)
    always, never = np.ones_like(best), np.zeros_like(best)
    assert v_star >= max(T.policy_values(tree, np.stack([always, never])))
    assert T.exploitability(tree, best) == 0.0
    # a role's best response can only close part of a policy's gap to the optimum
    gap = v_star - T.policy_values(tree, never[None])[0]
    assert 0.0 <= T.exploitability(tree, never) <= gap + 1e-12


def test_the_learned_table_reads_the_average_strategy(setup):
    tracer, _, tree = setup
    while tracer.step_count < tracer.cfg.max_steps:
        tracer.step()
    table = T.learned_table(tracer.controller)
    for r, role in enumerate(T.ROLES):
        matcher = tracer.controller.matchers[role]
        trained = np.flatnonzero(matcher.visits > 0)
        avg = matcher.average_strategy()
        assert np.array_equal(table[r, trained], (avg[trained, 1] >= avg[trained, 0]).astype(np.int8))
        assert np.all(table[r, matcher.visits == 0] == 1)  # never trained: the speaking default
