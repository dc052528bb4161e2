"""The property-testing kit (councilzoo.testing): broken games and agents fail their checkers with a
readable shrunk example, correct ones pass; the strategies cover every kind, game and role."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from councilzoo.agents import SimulatedAgent, default_mode
from councilzoo.agents.factory import build_models, check_keywords
from councilzoo.config import load_config
from councilzoo.envs import GAMES, debate_v0, make
from councilzoo.envs.scripted import ScriptedPlayer
from councilzoo.envs.types import Action, Mode
from councilzoo.envs.wrappers import OrderEnforcing
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.tasks import KINDS
from councilzoo.testing import checks, load_profile, strategies

CI = settings.get_profile("councilzoo-ci")  # what the checks run under here: 10 examples, derandomised
ROLES = {  # every role of every registered game
    "councilzoo/debate-v0": ["peer"],
    "councilzoo/review-v0": ["proposer", "reviewer"],
    "councilzoo/escalation-v0": ["anchor", "controller", "probe", "peer", "verifier"],
    "councilzoo/cohort-v0": ["member"],
}


class SkipInRoundOne(debate_v0.raw_env):
    """Broken on purpose: the action mask also allows SKIP in round 1, which the rules forbid."""

    def observe(self, agent):
        obs = super().observe(agent)
        if agent == self.agent_selection:
            obs["action_mask"][Mode.SKIP] = 1
        return obs


class DropsTheLastAction:
    """Broken on purpose: answers every context of a batch but the last."""

    def __init__(self):
        self.inner = SimulatedAgent("sim", 0.7)

    def act(self, contexts):
        return self.inner.act(contexts)[:-1]


def test_every_role_of_every_game_is_in_the_table():
    assert sorted(ROLES) == sorted(GAMES)


def test_a_mask_that_allows_an_illegal_mode_fails_check_env_with_the_first_turn():
    with pytest.raises(AssertionError) as failure:
        checks.check_env(lambda: OrderEnforcing(SkipInRoundOne()), pettingzoo_tests=False, settings=CI)
    message = str(failure.value)
    assert message.startswith("check_env(councilzoo/debate-v0): action mask and legal modes differ: ")
    assert (
        "peer_0's action_mask allows ['SKIP', 'SPEAK'] but turn_context('peer_0').legal_modes is ['SPEAK']"
    ) in message
    # shrunk to the smallest seed and no step at all: the very first observation is wrong
    assert message.endswith("shrunk counterexample: Episode(councilzoo/debate-v0, reset(seed=0), 0 steps)")


def test_pettingzoo_tests_also_catch_the_broken_mask():
    failed = r"pettingzoo\.test\.api_test failed: IllegalModeError: agent 'peer_\d' \(role 'peer', round 1\)"
    with pytest.raises(AssertionError, match=failed):
        checks._pettingzoo_tests(None, lambda: OrderEnforcing(SkipInRoundOne()), "broken", cycles=20)


def test_an_agent_that_returns_too_few_actions_fails_check_agent_with_one_context():
    with pytest.raises(AssertionError) as failure:
        checks.check_agent(DropsTheLastAction(), settings=CI)
    message = str(failure.value)
    assert message.startswith("check_agent(DropsTheLastAction): not one action per context: ")
    assert "returned 0 actions for a batch of 1 contexts" in message
    assert "shrunk counterexample: batch of 1 contexts:\n  0. " in message  # one line per context


def test_an_agent_that_speaks_for_free_or_plays_illegal_modes_fails():
    class Free:  # speaks without reporting calls or tokens
        def act(self, contexts):
            return [Action(default_mode(c), "The answer is \\boxed{1}.") for c in contexts]

    class AlwaysSkip:
        def act(self, contexts):
            return [Action(Mode.SKIP) for _ in contexts]

    free = r"a speaking action does not report its cost: action 0 \(\w+\): calls=0"
    with pytest.raises(AssertionError, match=free):
        checks.check_agent(Free(), settings=CI)
    illegal = r"illegal mode \(or actions out of order\): action 0 has mode SKIP"
    with pytest.raises(AssertionError, match=illegal):
        checks.check_agent(AlwaysSkip(), settings=CI)
    checks.check_agent(ScriptedPlayer(0), settings=CI)  # reports its calls and tokens


@pytest.mark.parametrize("deterministic", [False, True])
def test_simulated_agent_passes_check_agent(deterministic):
    checks.check_agent(SimulatedAgent("sim", 0.7, seed=3), deterministic=deterministic, settings=CI)


def test_a_game_whose_rewards_break_the_declared_rule_fails():
    def rewards_twice(episode):
        return dict.fromkeys(episode.returns, 2 * episode.record.reward + 1)

    with pytest.raises(AssertionError, match=r"rewards do not follow the declared rule: returns \{'peer_0'"):
        checks.check_env("councilzoo/debate-v0", reward=rewards_twice, pettingzoo_tests=False, settings=CI)


def test_check_env_takes_a_factory_and_refuses_an_env_without_turn_context():
    checks.check_env(lambda: debate_v0.env(num_agents=2, rounds=3), pettingzoo_tests=False, settings=CI)

    class Plain(debate_v0.raw_env):
        turn_context = None

    with pytest.raises(TypeError, match=r"check_env\(councilzoo/debate-v0\): the env has no turn_context"):
        checks.check_env(Plain, settings=CI)
    with pytest.raises(ValueError, match="unknown env id"):
        checks.check_env("councilzoo/chess-v0", settings=CI)


def test_problems_strategy_reaches_every_kind_and_images():
    seen, images = set(), False

    @settings(max_examples=80, derandomize=True, database=None)
    @given(strategies.problems())
    def collect(problem):
        nonlocal images
        seen.add(problem.kind)
        images = images or bool(problem.images)

    collect()
    assert seen == set(KINDS) and images


@pytest.mark.parametrize(("env_id", "role"), [(e, r) for e, roles in ROLES.items() for r in roles])
def test_turn_contexts_reach_every_role_of_every_game(env_id, role):
    @settings(max_examples=5)
    @given(strategies.turn_contexts(env_id, roles=[role]))
    def context_of_role(context):
        assert context.role == role and context.legal_modes
        env = make(env_id)
        assert isinstance(context.features, np.ndarray)
        assert context.features.shape == env.observation_space(context.agent)["features"].shape

    context_of_role()


@settings(max_examples=10)
@given(strategies.episodes("councilzoo/escalation-v0", num_peers=2))
def test_episodes_end_and_print_as_their_moves(episode):
    assert episode.ended and episode.record is not None and episode.steps
    assert repr(episode).startswith("Episode(councilzoo/escalation-v0, reset(seed=")
    assert f"0. anchor (anchor, round 0): {episode.steps[0].action.mode.name}" in repr(episode)


@settings(max_examples=10)
@given(strategies.agents_configs())
def test_agents_configs_load_and_build(config):
    council = load_config(config, CouncilConfig)
    for name, spec in council.models.items():
        check_keywords(name, spec)
    assert set(build_models(council.models)) == set(config["models"])


def test_profiles_load_by_short_and_full_name():
    before = settings.get_current_profile_name()
    try:
        load_profile("ci")
        assert settings.default.max_examples == 10 and settings.default.derandomize
        settings.load_profile("councilzoo-deep")
        assert settings.default.max_examples == 2000
        with pytest.raises(ValueError, match="unknown councilzoo profile 'fast'"):
            load_profile("fast")
    finally:
        settings.load_profile(before)


def test_check_agent_takes_the_contexts_of_the_seats_an_agent_plays():
    class Reviewer:  # only knows how to review: fine when it only gets reviewer turns
        def act(self, contexts):
            return [Action(Mode.SPEAK, "Verdict: RIGHT", calls=1) for _ in contexts]

    reviewers = strategies.turn_contexts("councilzoo/review-v0", roles=["reviewer"])
    checks.check_agent(Reviewer(), contexts=reviewers, settings=CI)
    with pytest.raises(AssertionError, match="illegal mode"):
        checks.check_agent(Reviewer(), settings=CI)


class NeverEnds(debate_v0.raw_env):
    """Broken on purpose: the debate never ends (its last round starts over)."""

    def _advance(self, turn):
        super()._advance(turn)
        return False


def test_a_game_that_never_ends_fails_check_env_at_once_in_one_message():
    """It once failed with a hypothesis health check on the huge input, or minutes of shrinking."""
    with pytest.raises(AssertionError) as failure:
        checks.check_env(lambda: OrderEnforcing(NeverEnds()), max_steps=300, pettingzoo_tests=False,
                         settings=CI)
    message = str(failure.value)
    assert message.startswith(
        "check_env(councilzoo/debate-v0): the episode never ends: agents ['peer_0', 'peer_1', 'peer_2'] "
        "still playing after 300 steps (random legal modes, no text); the first 9 steps below"
    )
    assert "HealthCheck" not in message and message.count("\n  ") == 9


class ReturnsPlainInts:
    """Returns the mode as a plain int: what a game's ``step`` takes, not what an agent returns."""

    def act(self, contexts):
        return [int(context.legal_modes[0]) for context in contexts]


def test_check_agent_holds_agents_to_action_as_its_docstring_says():
    assert "agents return ``Action`` itself" in " ".join(Action.__doc__.split())
    env = debate_v0.env(num_agents=2, rounds=2)
    env.reset(seed=0)
    env.step(int(Mode.SPEAK))  # a game's step takes a plain int
    with pytest.raises(AssertionError, match=r"not an Action: context 0: got int \d+; agents return Action"):
        checks.check_agent(ReturnsPlainInts(), settings=CI)
