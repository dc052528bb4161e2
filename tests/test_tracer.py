"""TRACER with simulated agents: values, convergence (regret bounds), learning, resume."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from councilzoo.config import ConfigError, load_config
from councilzoo.envs.types import Mode, Turn
from councilzoo.learners.tracer.config import TracerConfig
from councilzoo.learners.tracer.controller_layer import action_values, branch, play_episodes, snapshot
from councilzoo.learners.tracer.learner import FRESH_EPISODES, Tracer, consensus_labels, merge_shares
from councilzoo.tasks import extract_answer, plurality

# A pool where speaking sometimes harms: reviewers raise false alarms and proposers get swayed.
HARMFUL_POOL = {"proposer": {"skill": 0.5, "swayed_prob": 0.4},
                "reviewer": {"skill": 0.6, "catch_prob": 0.85, "false_alarm_prob": 0.25}}


def make(steps=15, **overrides) -> Tracer:
    data = {"max_steps": steps, "problems_per_step": 32, "env": {"lam": 0.03},
            "agents": {"simulated": HARMFUL_POOL}, "data": {"synthetic_size": 256}, **overrides}
    return Tracer(load_config(data, TracerConfig))


def train(tracer: Tracer) -> list[dict]:
    return [tracer.step() for _ in range(tracer.cfg.max_steps - tracer.step_count)]


def test_counterfactual_value_of_the_taken_mode_is_the_real_episode():
    tracer = make()
    problems, episodes = tracer.batch(0)
    records, decisions = play_episodes(tracer.player, tracer._reset(problems), episodes, tracer.state_fn,
                                       "counterfactual")
    # Replaying the taken mode from every snapshot reproduces the real episode (common random numbers).
    replay = [snapshot(d.snapshot) for d in decisions]
    tracer.player.play(replay, [episodes[d.episode] for d in decisions],
                       first_modes=[tracer.controller.roles[d.role][d.action] for d in decisions])
    for d, env in zip(decisions, replay, strict=True):
        assert env.episode_record().to_dict() == records[d.episode].to_dict()
    branch(tracer.player, decisions, episodes, "counterfactual")
    golds, kinds = [p.answer for p in problems], [p.kind for p in problems]
    values, valid = action_values(decisions, records, golds, kinds, "counterfactual", 0.03, "calls")
    assert valid.all() and len(decisions) > 50
    assert all(values[k, d.action] == records[d.episode].reward for k, d in enumerate(decisions))
    assert np.any(values[:, 0] != values[:, 1])


def test_myopic_values_of_taken_turns_equal_the_envs_role_rewards():
    tracer = make()
    problems, episodes = tracer.batch(0)
    envs = tracer._reset(problems)
    records, decisions = play_episodes(tracer.player, envs, episodes, tracer.state_fn, "myopic")
    branch(tracer.player, decisions, episodes, "myopic")
    values, _ = action_values(decisions, records, [p.answer for p in problems], [p.kind for p in problems],
                              "myopic", 0.0, "calls")
    for k, d in enumerate(decisions):
        assert values[k, d.action] == records[d.episode].info["turn_rewards"][d.turn_index]


@pytest.mark.parametrize("controller", [{"variant": "rm+"}, {"variant": "rm"}, {"update": "batch_mean"},
                                        {"values": "myopic"}])
def test_every_state_regret_stays_under_its_bound(controller):
    tracer = make(steps=8, controller=controller)
    for metrics in train(tracer):
        assert metrics["states_over_bound"] == []
        assert all(r["regret"] <= r["bound"] + 1e-9 for r in metrics["regret"])
    rows = tracer.controller.report()
    assert rows and all(r["visits"] > 0 and r["delta"] > 0 for r in rows)


def test_learned_policy_beats_always_and_never_speaking_where_speaking_can_harm():
    tracer = make()
    train(tracer)
    result = tracer.compare(tracer.eval_sets["synthetic:numeric"], ["always_speak", "never_review"])
    learned = result["tracer"]["objective"]
    assert learned > result["always_speak"]["objective"] + 0.02
    assert learned > result["never_review"]["objective"] + 0.02
    assert result["tracer"]["calls_per_question"] < result["always_speak"]["calls_per_question"]


def test_released_failure_case_plain_rm_myopic_locks_keep_counterfactual_rm_plus_does_not():
    """One early update favouring KEEP where REFRESH is better (proposer, last round, after a WRONG
    verdict). The release's values never evaluate an untaken REFRESH, so plain RM stays in KEEP
    forever; counterfactual values with RM+ recover (the early negative regret is clipped to 0).
    Plain RM with counterfactual values must first pay that regret back; on this problem set it
    has not within 10 steps, so only RM+'s recovery is asserted."""
    results = {}
    for name, controller in {"released": {"variant": "rm", "values": "myopic_released"},
                             "counterfactual_rm+": {"variant": "rm+"}}.items():
        tracer = make(steps=10, controller=controller)
        state = tracer.state_fn.names.index("-1|last")
        tracer.controller.update("proposer", [state], [[1.0, -1.0]])  # the unlucky first update
        train(tracer)
        m = tracer.controller.matchers["proposer"]
        results[name] = (m.visits[state], m.strategy([state])[0, 1], m.average_strategy([state])[0, 1])
    visits, current, average = results["released"]
    assert visits > 10 and current == 0.0 and average < 0.1  # locked into KEEP
    assert results["counterfactual_rm+"][1] > 0.3 and results["counterfactual_rm+"][2] > 0.5


def test_resume_restores_regrets_and_strategy_sums_exactly_and_continues_identically(tmp_path):
    straight = make(steps=6, output_dir=str(tmp_path / "a"))
    train(straight)
    first = make(steps=3, output_dir=str(tmp_path / "b"))
    train(first)
    path = first.save(tmp_path / "ckpt")
    resumed = make(steps=6, output_dir=str(tmp_path / "b"))
    resumed.load(path)
    for key, value in first.controller.state_dict().items():
        np.testing.assert_array_equal(resumed.controller.state_dict()[key], value)
    assert resumed.step_count == 3
    train(resumed)
    for key, value in straight.controller.state_dict().items():
        np.testing.assert_array_equal(resumed.controller.state_dict()[key], value)


def test_processes_playing_shares_of_a_step_learn_what_one_process_learns():
    """A world of 3 processes (its shares played here one after another): each plays a block of
    the step's problems, and the controllers learned from the merged step are one process's, the
    decisions in the order one process plays them (what a world's ranks gather)."""
    overrides = {"problems_per_step": 11, "episodes_per_problem": 2, "label_free": True}  # 11 = 4 + 4 + 3
    alone, ranks = make(steps=2, **overrides), [make(steps=2, **overrides) for _ in range(3)]
    for _ in range(2):
        problems, episodes = alone.batch(alone.step_count)
        shares = [r.play_share(problems, episodes, k, 3) for k, r in enumerate(ranks)]
        assert [len(s.records) for s in shares] == [8, 8, 6]
        whole, one = merge_shares(shares), alone.play_share(problems, episodes, 0, 1)
        assert [(d.episode, d.turn_index, d.role, d.state, d.action) for d in whole.decisions] == \
               [(d.episode, d.turn_index, d.role, d.state, d.action) for d in one.decisions]
        assert [(d.turn_index, d.episode) for d in one.decisions] == \
               sorted((d.turn_index, d.episode) for d in one.decisions)  # the order merge_shares keeps
        np.testing.assert_array_equal(whole.values, one.values)
        assert whole.labels == one.labels and len(one.decisions) > 20
        for kept in ("turns", "silent"):  # the utterance layer's candidates, numbered in the step
            merged, played = ([(e, c.role, c.problem.id, len(c.transcript), m)
                               for e, c, m in getattr(part, kept)] for part in (whole, one))  # fmt: skip
            assert merged == played and played, kept
        expected = alone.learn(problems, one, 0.0, 0)
        for rank in ranks:
            got = rank.learn(problems, whole, 0.0, 0)
            assert {k: v for k, v in got.items() if k not in ("ticks", "seconds")} == \
                   {k: v for k, v in expected.items() if k not in ("ticks", "seconds")}
            for key, value in alone.controller.state_dict().items():
                np.testing.assert_array_equal(rank.controller.state_dict()[key], value, err_msg=key)


def test_label_free_training_uses_peer_consensus_labels():
    tracer = make(steps=3, label_free=True, episodes_per_problem=3)
    metrics = train(tracer)
    assert all(0.0 < m["label_accuracy"] <= 1.0 for m in metrics)
    assert all(m["states_over_bound"] == [] for m in metrics)
    problems, _ = tracer.batch(0)
    records = [type("R", (), {"info": {"proposals": ["7", "7", None]}})()] * len(problems)
    assert set(consensus_labels(problems, records)) == {"7"}


def test_consensus_with_reviews_counts_each_speaking_reviewers_stated_answer():
    problem = make(steps=1).batch(0)[0][0]
    turns = [Turn("proposer_0", "proposer", 1, Mode.REFRESH, "The answer is \\boxed{7}.", answer="7"),
             Turn("reviewer_0", "reviewer", 2, Mode.SPEAK, "The answer is \\boxed{9}.", verdict="WRONG"),
             Turn("reviewer_0", "reviewer", 4, Mode.SPEAK, "I get \\boxed{9}.", verdict="WRONG"),
             Turn("reviewer_0", "reviewer", 6, Mode.SKIP)]
    record = type("R", (), {"info": {"proposals": ["7"]}, "turns": turns})()
    assert consensus_labels([problem], [record]) == ["7"]  # proposals only: the one REFRESH
    assert consensus_labels([problem], [record], with_reviews=True) == ["9"]  # two spoken 9s outvote it
    with pytest.raises(ConfigError, match="consensus_votes"):
        load_config({"consensus_votes": "reviews"}, TracerConfig)


def test_first_proposal_accuracy_is_the_share_of_right_first_proposals():
    """Correction and preservation condition on the first proposal, whose own accuracy is what the
    utterance layer trains; together they give the final accuracy (total probability:
    P(right) = P(first right) x preservation + P(first wrong) x correction), checked on one
    evaluation of a policy trained for 2 steps."""
    tracer = make(steps=2)
    train(tracer)
    m = tracer.evaluate(next(iter(tracer.eval_sets.values())))
    first = m["first_proposal_accuracy"]
    assert 0.0 < first < 1.0
    implied = first * m["preservation_rate"] + (1 - first) * m["correction_rate"]
    assert m["accuracy"] == pytest.approx(implied)


def test_bad_configs_fail_before_any_work():
    with pytest.raises(ConfigError, match="generation.enabled needs"):
        load_config({"generation": {"enabled": True}}, TracerConfig)
    with pytest.raises(ConfigError, match="baselines"):
        load_config({"baselines": ["sometimes"]}, TracerConfig)
    with pytest.raises(ConfigError, match="controller.values"):
        load_config({"controller": {"values": "oracle"}}, TracerConfig)


def test_role_agents_come_from_the_agents_factory():
    """agents.models replaces a role with any agent the factory builds (here a perfect simulated
    reviewer, and one built by import path): the swap shows in what the episodes measure."""
    perfect = {"skill": 0.6, "catch_prob": 1.0, "false_alarm_prob": 0.0}
    rows = {}
    for name, reviewer in [
        ("configured", None),
        ("perfect", {"type": "simulated", "kwargs": perfect}),
        ("by_path", {"type": "councilzoo.agents.simulated:SimulatedAgent",
                     "kwargs": {"name": "r", **perfect}}),
    ]:
        agents = {"simulated": HARMFUL_POOL, **({"models": {"reviewer": reviewer}} if reviewer else {})}
        tracer = make(steps=1, agents=agents)
        bound = tracer.engine.binding.agent_for("reviewer_0", "reviewer")
        assert bound.catch_prob == (0.85 if reviewer is None else 1.0)
        rows[name] = tracer.compare(next(iter(tracer.eval_sets.values())), baselines=["always_speak"])
    assert rows["perfect"] == rows["by_path"]  # same agent, seeded alike
    always = {name: r["always_speak"]["harmful_flip_rate"] for name, r in rows.items()}
    assert always["perfect"] == 0.0 < always["configured"], always  # no false alarm flips a right answer


def test_bad_role_models_fail_before_any_work():
    with pytest.raises(ConfigError, match=r"agents.models.reviewer.kwargs.skil: SimulatedAgent has no"):
        load_config({"agents": {"models": {"reviewer": {"type": "simulated", "kwargs": {"skil": 0.5}}}}},
                    TracerConfig)
    with pytest.raises(ConfigError, match="roles \\['judge'\\]"):
        load_config({"agents": {"models": {"judge": {"type": "simulated"}}}}, TracerConfig)
    with pytest.raises(ConfigError, match="agents.render 'nopkg.prompts:render': cannot import"):
        load_config({"agents": {"render": "nopkg.prompts:render"}}, TracerConfig)
    with pytest.raises(ConfigError, match="LM_ROUNDS. is not callable"):
        load_config({"agents": {"render": "councilzoo.repro.tracer:LM_ROUNDS"}}, TracerConfig)
    with pytest.raises(ConfigError, match="the proposer is trained"):
        load_config({"agents": {"kind": "llm", "model": "m", "models": {"proposer": {"type": "simulated"}}}},
                    TracerConfig)


def test_tracer_trains_on_code_problems_graded_by_program_outputs():
    """The review game on programs: proposals are programs run in the sandbox, so accuracy and
    the controllers' values come from output signatures."""
    from councilzoo.tasks import load_problems

    tracer = make(steps=2, problems_per_step=8, data={"train": "synthetic:code", "synthetic_size": 16})
    metrics = train(tracer)
    assert all(m["states_over_bound"] == [] for m in metrics)
    result = tracer.evaluate(load_problems("synthetic:code", "test", size=8))
    assert 0.0 < result["accuracy"] <= 1.0  # simulated proposers state the reference program when right


def test_a_reviewer_that_gives_no_verdict_scores_as_a_wrong_one():
    from councilzoo.learners.tracer.controller_layer import turn_score
    from councilzoo.learners.tracer.utterance_layer import UtteranceReward

    silent = Turn("reviewer_0", "reviewer", 2, Mode.SPEAK, "hmm, hard to say")
    wrong = Turn("reviewer_0", "reviewer", 2, Mode.SPEAK, "Verdict: WRONG", verdict="WRONG")
    assert turn_score(silent, "7", "7", "numeric") == turn_score(wrong, "7", "7", "numeric") == -1.0
    assert turn_score(silent, "7", "7", "numeric", no_verdict=0.0) == 0.0  # myopic_released: the release
    reward = UtteranceReward(cost_penalty=0.0, max_new_tokens=8)
    texts = ["hmm, hard to say", "Verdict: RIGHT", "Verdict: WRONG"]
    scores = reward(None, texts, [[1]] * 3, role=["reviewer"] * 3, mode=[int(Mode.SPEAK)] * 3,
                    kind=["numeric"] * 3, label=["7"] * 3, pending=["7"] * 3)
    assert scores == [-1.0, 1.0, -1.0]  # no verdict is no better than a wrong one


def test_leave_one_out_labels_never_let_a_sample_vote_for_itself():
    from councilzoo.learners.tracer.utterance_layer import leave_one_out_labels

    assert leave_one_out_labels(["7", "7", "9"], "numeric") == ["7", "7", "7"]
    assert leave_one_out_labels(["9", "7"], "numeric") == ["7", "9"]  # a lone answer cannot confirm itself
    assert leave_one_out_labels(["7", None, None], "numeric") == [None, "7", "7"]


def test_sampled_consensus_comes_from_fresh_proposals_the_controllers_do_not_shape():
    tracer = make(steps=2, label_free=True, consensus_votes="samples", consensus_samples=5)
    problems, _ = tracer.batch(0)
    before = tracer.sampled_consensus(problems)
    # the label is the plurality of 5 opening proposals per problem, drawn outside the episodes
    envs = tracer._reset(problems[:1] * 5)
    contexts = [env.turn_context(env.agent_selection) for env in envs]
    fresh = [replace(ctx, extras={**ctx.extras, "episode": FRESH_EPISODES + j})
             for j, ctx in enumerate(contexts)]
    answers = [extract_answer(a.text, problems[0].kind) for a, _ in tracer.engine._act(fresh)]
    assert before[0] == plurality(answers, problems[0].kind)[0] and before[0] is not None
    metrics = train(tracer)  # the controllers learn; the labels of the same problems do not move
    assert tracer.sampled_consensus(problems) == before
    assert all(0.0 < m["label_accuracy"] <= 1.0 for m in metrics)
    with pytest.raises(ValueError, match="consensus_samples"):
        load_config({"consensus_samples": 0}, TracerConfig)
