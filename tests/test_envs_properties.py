"""Properties of random legal play in every turn-based game (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.envs import debate_v0, escalation_v0, review_v0
from councilzoo.envs.core import Cost
from councilzoo.envs.scripted import ScriptedPlayer, play_episode
from councilzoo.tasks import synthetic_problems

PROBLEMS = synthetic_problems("numeric", 8, seed=2) + synthetic_problems("multiple_choice", 4, seed=2)

GAMES = st.one_of(
    st.builds(
        lambda n, r: (debate_v0, {"num_agents": n, "rounds": r}, n * r), st.integers(2, 5), st.integers(1, 4)
    ),
    st.builds(
        lambda n, r, stop, rule: (
            review_v0,
            {"num_agents": n, "rounds": r, "early_stop": stop, "final_rule": rule},
            sum(n - n // 2 if k % 2 == 0 else n // 2 for k in range(1, r + 1)),
        ),
        st.integers(2, 5),
        st.integers(1, 6),
        st.booleans(),
        st.sampled_from(["last_pending", "majority"]),
    ),
    st.builds(
        lambda k, r: (escalation_v0, {"num_peers": k, "debate_rounds": r}, 4 + k * r),
        st.integers(1, 4),
        st.integers(1, 3),
    ),
)


@given(GAMES, st.integers(0, 2**16), st.floats(0.0, 1.0), st.sampled_from(["calls", "tokens"]))
def test_random_legal_play(game, seed, p_correct, cost_unit):
    module, kwargs, max_steps = game
    env = module.env(problems=PROBLEMS, lam=0.01, cost_unit=cost_unit, **kwargs)
    steps = play_episode(env, ScriptedPlayer(seed, p_correct), seed=seed)
    raw = env.unwrapped
    record = raw.episode_record()
    # terminates within the round limit
    assert 1 <= steps == len(record.turns) <= max_steps and env.agents == []
    assert max(t.round for t in record.turns) <= kwargs.get("rounds", kwargs.get("debate_rounds"))
    # total cost equals the sum of per-turn costs, and of per-agent costs
    per_turn, per_agent = Cost(), Cost()
    for turn in record.turns:
        per_turn.add(turn.cost)
    for cost in record.cost_by_agent.values():
        per_agent.add(cost)
    assert record.cost == per_turn == per_agent
    spent = record.cost.calls if cost_unit == "calls" else record.cost.tokens
    assert record.reward == pytest.approx(float(bool(record.correct)) - 0.01 * spent)
    # the final answer appeared in the transcript (or is None)
    assert record.final_answer is None or record.final_answer in {t.answer for t in record.turns}
    # grading agrees with the gold answer
    assert record.correct == (
        record.final_answer is not None
        and raw.problem.answer is not None
        and _equal(record.final_answer, raw.problem)
    )


def _equal(answer, problem):
    from councilzoo.tasks import answers_equivalent

    return answers_equivalent(answer, problem.answer, problem.kind)


@given(st.integers(0, 2**16), st.integers(1, 3), st.floats(0.0, 1.0))
def test_rescue_harm_labels_agree_with_outcomes(seed, num_peers, p_correct):
    env = escalation_v0.env(problems=PROBLEMS, num_peers=num_peers)
    play_episode(env, ScriptedPlayer(seed, p_correct), seed=seed)
    record = env.unwrapped.episode_record()
    info = record.info
    e, y_a, y_c = info["escalated"], info["anchor_correct"], info["collab_correct"]
    assert e == int(info["path"] in ("probe_verify", "escalate", "probe_escalate"))
    assert (y_c is None) == (e == 0)
    # final correctness = (1 - e) Y_a + e Y_c, and the labels are its decomposition
    assert int(record.correct) == (1 - e) * int(y_a) + e * int(bool(y_c))
    assert info["rescue"] == bool(e and not y_a and y_c)
    assert info["harm"] == bool(e and y_a and not y_c)
    assert int(record.correct) - int(y_a) == int(info["rescue"]) - int(info["harm"])
