"""Every councilzoo game against PettingZoo's own test suites and councilzoo's contracts (both through
``councilzoo.testing.checks.check_env``), the registry and make()."""

from __future__ import annotations

import json
import warnings

import pettingzoo
import pytest
from hypothesis import settings
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.test import parallel_api_test, performance_benchmark
from pettingzoo.utils.wrappers import BaseWrapper

from councilzoo.envs import (
    GAMES,
    PARALLEL_GAMES,
    IllegalModePenalty,
    cohort_v0,
    debate_v0,
    escalation_v0,
    make,
    make_parallel,
    review_v0,
)
from councilzoo.envs.scripted import ScriptedPlayer, play_episode
from councilzoo.tasks import synthetic_problems
from councilzoo.testing import checks

CI = settings.get_profile("councilzoo-ci")

PROBLEMS = synthetic_problems("numeric", 6, seed=1)
MODULES = {
    "debate": (debate_v0, {"num_agents": 3, "rounds": 3}),
    "review": (review_v0, {"num_agents": 3, "rounds": 5}),
    "escalation": (escalation_v0, {"num_peers": 2, "debate_rounds": 2}),
    "cohort": (cohort_v0, {"num_agents": 3, "reward_rule": "peer_majority", "views": [0, 1, 2]}),
}


@pytest.fixture(autouse=True)
def _quiet_pettingzoo_style_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Dict/Text observations are by design
        yield


@pytest.mark.parametrize("env_id", sorted(GAMES))
def test_check_env_passes_with_default_arguments(env_id):
    """All of pettingzoo.test that applies (api, seed, render; for cohort-v0 the parallel api and
    seed tests and max_cycles_test) and councilzoo's contracts, on the registered id."""
    checks.check_env(env_id, settings=CI)


@pytest.mark.parametrize("name", MODULES)
def test_check_env_passes_with_other_arguments(name):
    module, kwargs = MODULES[name]
    checks.check_env(f"councilzoo/{name}-v0", problems=PROBLEMS, settings=CI, cycles=60, **kwargs)


@pytest.mark.parametrize("env_id", sorted(GAMES))
def test_human_render_prints_and_the_performance_benchmark_runs(env_id, capsys):
    env = make(env_id, render_mode="human")
    env.reset(seed=0)
    assert env.render() is None and f"== {env_id} |" in capsys.readouterr().out
    performance_benchmark(make(env_id))


@pytest.mark.parametrize("env_id", sorted(GAMES))
def test_make_gives_the_aec_form_and_turn_context_through_every_wrapper(env_id):
    assert isinstance(make(env_id), AECEnv)
    for env in (make(env_id), IllegalModePenalty(make(env_id)), BaseWrapper(make(env_id))):
        env.reset(seed=0)
        agent = env.agent_selection
        assert env.turn_context(agent).agent == agent and env.turn_context(agent).legal_modes
    if env_id in PARALLEL_GAMES:
        assert isinstance(make_parallel(env_id), ParallelEnv)
    else:
        with pytest.raises(ValueError, match="turn-based and has no parallel form"):
            make_parallel(env_id)


@pytest.mark.parametrize("env_id", sorted(GAMES))
@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_reset_rejects_a_seed_that_is_not_a_non_negative_int(env_id, seed):
    with pytest.raises(ValueError, match=rf"seed must be None or an integer >= 0, got {seed!r}"):
        make(env_id).reset(seed=seed)


def test_cohort_parallel_api_test():
    parallel_api_test(cohort_v0.parallel_env(problems=PROBLEMS, num_agents=3), num_cycles=10)


@pytest.mark.parametrize("env_id", sorted(GAMES))
def test_registered_with_pettingzoo(env_id):
    env = pettingzoo.make("aec", env_id, problems=PROBLEMS)
    env.reset(seed=0)
    assert env.agent_selection in env.possible_agents
    assert "councilzoo/cohort-v0" in pettingzoo.parallel_registry


def test_make_rejects_unknown_ids_and_keywords_before_work():
    with pytest.raises(ValueError, match=r"unknown env id 'councilzoo/chess-v0'.*councilzoo/debate-v0"):
        make("councilzoo/chess-v0")
    with pytest.raises(TypeError, match=r"unknown keyword argument\(s\) \['num_rounds'\].*'rounds'"):
        make("councilzoo/debate-v0", num_rounds=3)
    with pytest.raises(ValueError, match="num_agents must be an integer >= 2"):
        make("councilzoo/debate-v0", num_agents=1, problems=PROBLEMS)
    with pytest.raises(ValueError, match="cost_unit must be one of"):
        make("councilzoo/review-v0", cost_unit="dollars", problems=PROBLEMS)
    with pytest.raises(ValueError, match="reward_rule must be one of"):
        make("councilzoo/cohort-v0", reward_rule="majority", problems=PROBLEMS)


def test_default_problems_are_synthetic_numeric():
    env = make("councilzoo/debate-v0")
    env.reset(seed=0)
    assert env.unwrapped.problem.kind == "numeric" and len(env.unwrapped.deck.problems) == 100


def test_reset_seed_reproduces_the_problem_sequence_and_options_pin_one():
    a, b = make("councilzoo/debate-v0", problems=PROBLEMS), make("councilzoo/debate-v0", problems=PROBLEMS)
    seq_a, seq_b = [], []
    for env, seq in ((a, seq_a), (b, seq_b)):
        env.reset(seed=7)
        seq.append(env.unwrapped.problem.id)
        for _ in range(len(PROBLEMS) - 1):
            env.reset()
            seq.append(env.unwrapped.problem.id)
    assert seq_a == seq_b and sorted(seq_a) == sorted(p.id for p in PROBLEMS)  # one pass deals each once
    a.reset(options={"problem_index": 4})
    assert a.unwrapped.problem is PROBLEMS[4]
    a.reset(options={"problem": PROBLEMS[2]})
    assert a.unwrapped.problem is PROBLEMS[2]


@pytest.mark.parametrize("name", ["debate", "review", "escalation"])
def test_episode_record_is_json_and_render_is_ansi_text(name):
    module, kwargs = MODULES[name]
    env = module.env(problems=PROBLEMS, render_mode="ansi", **kwargs)
    play_episode(env, ScriptedPlayer(seed=2), seed=0)
    record = env.unwrapped.episode_record()
    assert json.loads(json.dumps(record.to_dict()))["problem_id"] == record.problem_id
    text = env.render()
    assert record.problem_id in text and "final answer:" in text


def test_cohort_record_and_render():
    env = cohort_v0.parallel_env(problems=PROBLEMS, num_agents=2, render_mode="ansi")
    env.reset(seed=0)
    player = ScriptedPlayer(seed=0, samples=4)
    _, rewards, done, _, infos = env.step({a: player.act_one(env.turn_context(a)) for a in env.agents})
    assert all(done.values()) and env.agents == []
    record = env.episode_record()
    json.dumps(record.to_dict())
    assert record.cost.calls == 8 and "label=" in env.render()


def test_docs_envs_md_is_generated_from_the_docstrings():
    from pathlib import Path

    from councilzoo.envs.docs import build

    page = Path(__file__).resolve().parents[1] / "docs" / "envs.md"
    assert page.read_text() == build(), "regenerate: python -m councilzoo.envs.docs > docs/envs.md"
