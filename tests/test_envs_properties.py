"""Properties of random legal play (with garbage model text) in every turn-based game, over drawn
game arguments: the kit's episode contracts (costs, declared rewards) and each game's own bounds."""

from __future__ import annotations

from functools import partial

from hypothesis import given
from hypothesis import strategies as st

from councilzoo.envs import debate_v0, escalation_v0, review_v0
from councilzoo.tasks import answers_equivalent, synthetic_problems
from councilzoo.testing import checks, strategies

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


@given(GAMES, st.sampled_from(["calls", "tokens"]), st.data())
def test_random_legal_play(game, cost_unit, data):
    module, kwargs, max_steps = game
    factory = partial(module.env, problems=PROBLEMS, lam=0.01, cost_unit=cost_unit, **kwargs)
    episode = data.draw(strategies.episodes(factory))
    checks.check_episode(episode)  # costs add up per agent and turn; rewards are correct - lam * cost
    record, raw = episode.record, episode.env.unwrapped
    # terminates within the round limit
    assert episode.ended and 1 <= len(episode.steps) == len(record.turns) <= max_steps
    assert max(t.round for t in record.turns) <= kwargs.get("rounds", kwargs.get("debate_rounds"))
    # the final answer appeared in the transcript (or is None)
    assert record.final_answer is None or record.final_answer in {t.answer for t in record.turns}
    # grading agrees with the gold answer
    assert record.correct == (
        record.final_answer is not None
        and raw.problem.answer is not None
        and answers_equivalent(record.final_answer, raw.problem.answer, raw.problem.kind)
    )


@given(st.integers(1, 3), st.data())
def test_rescue_harm_labels_agree_with_outcomes(num_peers, data):
    factory = partial(escalation_v0.env, problems=PROBLEMS, num_peers=num_peers)
    record = data.draw(strategies.episodes(factory)).record
    info = record.info
    e, y_a, y_c = info["escalated"], info["anchor_correct"], info["collab_correct"]
    assert e == int(info["path"] in ("probe_verify", "escalate", "probe_escalate"))
    assert (y_c is None) == (e == 0)
    # final correctness = (1 - e) Y_a + e Y_c, and the labels are its decomposition
    assert int(record.correct) == (1 - e) * int(y_a) + e * int(bool(y_c))
    assert info["rescue"] == bool(e and not y_a and y_c)
    assert info["harm"] == bool(e and y_a and not y_c)
    assert int(record.correct) - int(y_a) == int(info["rescue"]) - int(info["harm"])
