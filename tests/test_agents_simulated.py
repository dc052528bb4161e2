"""SimulatedAgent: calibration, correlated errors, rescue/harm in debate, every role of every game."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

from councilzoo.agents import FixedController, SimulatedAgent
from councilzoo.envs.types import Mode, TurnContext
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import answers_equivalent, extract_answer, plurality, synthetic_problems
from councilzoo.testing import checks

CI = settings.get_profile("councilzoo-ci")


def first_answers(agent: SimulatedAgent, problems) -> list[str | None]:
    """The agent's first answer to each problem, read back from its text by the grading code."""
    contexts = [
        TurnContext(0, agent.name, "probe", 0, p, (), (Mode.ANSWER,), None, {}) for p in problems
    ]
    return [extract_answer(a.text, p.kind) for a, p in zip(agent.act(contexts), problems, strict=True)]


def accuracy(answers, problems) -> float:
    pairs = zip(answers, problems, strict=True)
    return float(np.mean([answers_equivalent(a, p.answer, p.kind) for a, p in pairs]))


@pytest.fixture(scope="module")
def numeric_5000():
    return synthetic_problems("numeric", 5000, seed=11)


@pytest.mark.parametrize(("skill", "correlation"), [(0.3, 0.0), (0.55, 0.5), (0.9, 0.9)])
def test_single_agent_accuracy_matches_skill(numeric_5000, skill, correlation):
    agent = SimulatedAgent("solo", skill, seed=5, correlation=correlation)
    assert abs(accuracy(first_answers(agent, numeric_5000), numeric_5000) - skill) <= 0.02


def test_calibration_holds_for_multiple_choice():
    problems = synthetic_problems("multiple_choice", 5000, seed=12)
    agent = SimulatedAgent("solo", 0.65, seed=2)
    assert abs(accuracy(first_answers(agent, problems), problems) - 0.65) <= 0.02


def test_harder_problems_score_lower():
    easy, hard = (synthetic_problems("numeric", 2000, seed=3, difficulty=d) for d in (0.3, 0.7))
    agent = SimulatedAgent("a", 0.6)
    assert accuracy(first_answers(agent, easy), easy) > 0.7 > 0.5 > accuracy(first_answers(agent, hard), hard)


def shared_wrong_rate(correlation: float, problems) -> float:
    a = first_answers(SimulatedAgent("a", 0.6, seed=1, correlation=correlation), problems)
    b = first_answers(SimulatedAgent("b", 0.6, seed=2, correlation=correlation), problems)
    return float(np.mean([
        x is not None and not answers_equivalent(x, p.answer, p.kind) and answers_equivalent(x, y, p.kind)
        for x, y, p in zip(a, b, problems, strict=True)
    ]))


def test_shared_wrong_rate_is_monotone_in_correlation():
    problems = synthetic_problems("numeric", 2000, seed=13)
    rates = [shared_wrong_rate(c, problems) for c in (0.0, 0.3, 0.6, 1.0)]
    assert all(lo < hi for lo, hi in zip(rates, rates[1:], strict=False)), rates
    assert rates[0] < 0.02 and rates[-1] > 0.3


def debate_outcomes(correlation: float, problems):
    agents = {f"peer_{i}": SimulatedAgent(f"p{i}", 0.6, seed=i, correlation=correlation) for i in range(3)}
    records = RolloutEngine("councilzoo/debate-v0", agents, num_envs=64, progress=False).run(problems)
    gold = {p.id: p.answer for p in problems}
    initial, final, single = [], [], []
    for r in records:
        first = [t.answer for t in r.turns if t.round == 1]
        initial.append(answers_equivalent(plurality(first, "numeric")[0], gold[r.problem_id], "numeric"))
        single.append(answers_equivalent(first[0], gold[r.problem_id], "numeric"))
        final.append(bool(r.correct))
    return np.array(initial), np.array(final), np.array(single)


def test_debate_shows_rescue_and_harm_and_collapses_with_correlation():
    problems = synthetic_problems("numeric", 400, seed=14)
    initial, final, single = debate_outcomes(0.0, problems)
    rescue, harm = np.mean(final & ~initial), np.mean(initial & ~final)
    assert rescue > 0.03 and harm > 0.01 and rescue > harm
    gain_independent = final.mean() - single.mean()
    _, final_corr, single_corr = debate_outcomes(0.9, problems)
    gain_correlated = final_corr.mean() - single_corr.mean()
    assert gain_independent > 0.1 and gain_correlated < gain_independent / 2


def test_reviewer_catches_and_false_alarms_at_configured_rates():
    problems = synthetic_problems("numeric", 1500, seed=15)
    gold = {p.id: p.answer for p in problems}
    agents = {"proposer": SimulatedAgent("prop", 0.5),
              "reviewer": SimulatedAgent("rev", 0.5, catch_prob=0.8, false_alarm_prob=0.1)}
    engine = RolloutEngine("councilzoo/review-v0", agents, env_kwargs={"rounds": 2}, num_envs=64,
                           progress=False)
    on_wrong, on_right = [], []
    for r in engine.run(problems):
        proposal, review = r.turns
        right = answers_equivalent(proposal.answer, gold[r.problem_id], "numeric")
        (on_right if right else on_wrong).append(review.verdict == "WRONG")
    assert abs(np.mean(on_wrong) - 0.8) < 0.04
    assert abs(np.mean(on_right) - 0.1) < 0.03


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("councilzoo/debate-v0", {"num_agents": 3, "rounds": 3}),
        ("councilzoo/review-v0", {"num_agents": 3, "rounds": 5}),
        ("councilzoo/escalation-v0", {"num_peers": 3}),
        ("councilzoo/cohort-v0", {"num_agents": 3, "num_samples": 4}),
    ],
)
def test_plays_every_role_of_every_game(env_id, kwargs):
    problems = synthetic_problems("numeric", 40, seed=16)
    agent = SimulatedAgent("sim", 0.7, seed=3)
    records = RolloutEngine(env_id, {"*": agent}, env_kwargs=kwargs, num_envs=8, progress=False).run(problems)
    assert len(records) == 40 and all(r.final_answer is not None for r in records)
    assert all(t.answer is not None or t.verdict is not None for r in records for t in r.turns if t.text)
    assert all(r.cost.prompt_tokens > 0 and r.cost.completion_tokens > 0 for r in records)


def test_escalation_verify_path_and_informative_self_consistency():
    problems = synthetic_problems("numeric", 200, seed=17)
    gate = SimulatedAgent("gate", 0.6, controller=FixedController(Mode.VERIFY))
    agents = {"*": SimulatedAgent("sim", 0.6), "controller": gate}
    records = RolloutEngine("councilzoo/escalation-v0", agents, env_kwargs={"anchor_samples": 5},
                            num_envs=16, progress=False).run(problems)
    assert all(r.info["path"] == "probe_verify" for r in records)
    assert all(len(r.turns[0].samples) == 5 for r in records)
    consistency = np.array([r.info["consistency"] for r in records])
    correct = np.array([bool(r.info["anchor_correct"]) for r in records])
    assert consistency[correct].mean() > consistency[~correct].mean() + 0.2


def test_token_cost_grows_with_the_transcript():
    problems = synthetic_problems("numeric", 5, seed=18)
    record = RolloutEngine("councilzoo/debate-v0", {"peer": SimulatedAgent("s", 0.5)},
                           env_kwargs={"rounds": 3}, num_envs=1, progress=False).run(problems)[0]
    prompt = [t.cost.prompt_tokens for t in record.turns if t.mode is Mode.SPEAK]
    assert prompt[-1] > prompt[0]


def test_bad_parameters_fail_early():
    with pytest.raises(ValueError, match="skill"):
        SimulatedAgent("x", 1.5)
    with pytest.raises(ValueError, match="correlation"):
        SimulatedAgent("x", 0.5, correlation=-0.1)


def test_unlabeled_problem_is_a_clear_error():
    problem = synthetic_problems("numeric", 1, seed=0)[0]
    problem.answer = None
    with pytest.raises(ValueError, match="needs problem.answer"):
        first_answers(SimulatedAgent("x", 0.5), [problem])


def test_passes_check_agent_and_draws_do_not_depend_on_the_batch():
    """One legal action per context of every game and role (odd problems too), with costs; each
    action the same alone as in any batch."""
    checks.check_agent(SimulatedAgent("a", 0.5, seed=9), deterministic=True, settings=CI)
