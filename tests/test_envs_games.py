"""The rules of each game: schedules, legal modes, final answers, features, infos, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from councilzoo.envs import (
    IllegalModeError,
    IllegalModePenalty,
    cohort_v0,
    debate_v0,
    escalation_v0,
    review_v0,
)
from councilzoo.envs.escalation_v0 import (
    ANCHOR_CONSISTENCY,
    HAS_ROUTER_MARGIN,
    PHASE,
    PROBE_AGREES,
    ROUTER_MARGIN,
)
from councilzoo.envs.review_v0 import (
    HAS_PENDING,
    IS_LAST_PROPOSAL_ROUND,
    NUM_INVALID_VOTES,
    NUM_VOTES,
    VOTE_SCORE,
)
from councilzoo.envs.scripted import ScriptedPlayer
from councilzoo.envs.types import Action, Mode
from councilzoo.tasks import Problem, synthetic_problems

PROBLEM = Problem("q1", "What is 6 * 7?", "42", kind="numeric", metadata={"router_margin": 0.3})
UNLABELED = Problem("q2", "What is 6 * 7?", None, kind="numeric")


def say(mode: Mode, answer: str | None = None, text: str = "") -> Action:
    return Action(
        mode, text or (f"The answer is {answer}." if answer is not None else ""), calls=1 if answer else 0
    )


def run(env, actions):
    for action in actions:
        env.step(action)
    return env


# ---- debate ------------------------------------------------------------------------------------


def test_debate_round_one_must_speak_and_skip_keeps_the_answer():
    env = debate_v0.raw_env(num_agents=3, rounds=2, problems=[PROBLEM])
    env.reset(seed=0)
    assert env.legal_modes("peer_0") == (Mode.SPEAK,) and env.legal_modes("peer_1") == ()
    run(env, [say(Mode.SPEAK, "41"), say(Mode.SPEAK, "42"), say(Mode.SPEAK, "42")])
    assert set(env.legal_modes("peer_0")) == {Mode.SPEAK, Mode.SKIP}
    run(env, [Action(Mode.SKIP), Action(Mode.SKIP), say(Mode.SPEAK, "41")])
    record = env.episode_record()
    assert record.final_answer == "41" and record.correct is False  # 41 (peers 0, 2) beats 42
    assert record.cost.calls == 4 and sum(t.cost.calls for t in record.turns) == 4


def test_debate_tie_goes_to_the_lowest_numbered_peer():
    env = debate_v0.raw_env(num_agents=2, rounds=1, problems=[PROBLEM])
    env.reset(seed=0)
    run(env, [say(Mode.SPEAK, "7"), say(Mode.SPEAK, "42")])
    assert env.episode_record().final_answer == "7"
    env.reset(seed=0)
    run(env, [say(Mode.SPEAK, text="no idea"), say(Mode.SPEAK, "42")])
    assert env.episode_record().final_answer == "42"  # no answer never wins


def test_debate_rounds_are_simultaneous_in_what_peers_see():
    env = debate_v0.raw_env(num_agents=2, rounds=2, problems=[PROBLEM])
    env.reset(seed=0)
    env.step(say(Mode.SPEAK, "40"))
    ctx = env.turn_context("peer_1")
    assert ctx.transcript == () and ctx.extras["peer_answers"]["peer_0"] is None
    assert "40" not in env.observe("peer_1")["transcript"]
    env.step(say(Mode.SPEAK, "42"))
    ctx = env.turn_context("peer_0")
    assert [t.answer for t in ctx.transcript] == ["40", "42"]
    assert ctx.features[debate_v0.TOP_SHARE] == pytest.approx(0.5)
    assert ctx.features[debate_v0.AGREES_WITH_TOP] == 1.0  # tie keeps peer_0's 40


# ---- review ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n,split", [(2, (1, 1)), (3, (1, 2)), (4, (2, 2)), (5, (2, 3))])
def test_review_uses_every_role_for_any_n(n, split):
    env = review_v0.raw_env(num_agents=n, problems=[PROBLEM])
    roles = list(env.roles.values())
    assert (roles.count("proposer"), roles.count("reviewer")) == split


def test_review_schedule_features_and_correction_event():
    env = review_v0.raw_env(num_agents=3, rounds=5, problems=[PROBLEM], lam=0.1)
    env.reset(seed=0)
    assert env.legal_modes("proposer_0") == (Mode.REFRESH,)
    assert env.turn_context("proposer_0").features[HAS_PENDING] == 0
    env.step(say(Mode.REFRESH, "40"))
    env.step(Action(Mode.SPEAK, "Verdict: WRONG", calls=1))
    env.step(Action(Mode.SPEAK, "hmm, hard to say", calls=1))  # invalid vote
    f = env.turn_context("proposer_0").features
    assert (f[VOTE_SCORE], f[NUM_VOTES], f[NUM_INVALID_VOTES], f[IS_LAST_PROPOSAL_ROUND]) == (-1, 1, 1, 0)
    assert set(env.legal_modes("proposer_0")) == {Mode.KEEP, Mode.REFRESH}
    env.step(say(Mode.REFRESH, "42"))
    assert env.turn_context("reviewer_0").features[NUM_VOTES] == 0  # votes reset on a new proposal
    run(env, [Action(Mode.SPEAK, "**RIGHT**", calls=1), Action(Mode.SKIP)])
    assert env.turn_context("proposer_0").features[IS_LAST_PROPOSAL_ROUND] == 1
    env.step(Action(Mode.KEEP))
    record = env.episode_record()
    assert record.final_answer == "42" and record.correct is True
    assert record.info["correction"] is True and record.info["harmful_flip"] is False
    # the invalid vote scores -1, as a wrong verdict (the release: 0, above a wrong verdict)
    assert record.info["turn_rewards"] == [-1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0]
    assert record.reward == pytest.approx(1.0 - 0.1 * 5)
    assert env.infos["reviewer_0"]["role_reward"] == 1.0 and env.infos["reviewer_1"]["role_reward"] == 0.0


def test_review_early_stop_on_unanimous_right_and_harmful_flip():
    env = review_v0.raw_env(num_agents=3, rounds=5, early_stop=True, problems=[PROBLEM])
    env.reset(seed=0)
    run(env, [say(Mode.REFRESH, "42"), Action(Mode.SPEAK, "RIGHT"), Action(Mode.SPEAK, "RIGHT")])
    assert all(env.terminations.values()) and env.episode_record().info["rounds_played"] == 2
    env = review_v0.raw_env(num_agents=2, rounds=3, problems=[PROBLEM])
    env.reset(seed=0)
    run(env, [say(Mode.REFRESH, "42"), Action(Mode.SPEAK, "WRONG"), say(Mode.REFRESH, "41")])
    info = env.episode_record().info
    assert info["harmful_flip"] is True and info["preservation"] is False


def test_review_majority_final_rule_counts_all_proposals_latest_first():
    env = review_v0.raw_env(num_agents=2, rounds=5, final_rule="majority", problems=[PROBLEM])
    env.reset(seed=0)
    run(
        env,
        [
            say(Mode.REFRESH, "42"),
            Action(Mode.SKIP),
            say(Mode.REFRESH, "42"),
            Action(Mode.SKIP),
            say(Mode.REFRESH, "7"),
        ],
    )
    assert env.episode_record().final_answer == "42"


def test_review_unlabeled_problem_has_no_role_rewards():
    env = review_v0.raw_env(num_agents=2, rounds=1, problems=[UNLABELED])
    env.reset(seed=0)
    env.step(say(Mode.REFRESH, "42"))
    assert env.episode_record().correct is None and env.infos["proposer_0"]["role_reward"] is None


# ---- escalation --------------------------------------------------------------------------------


def anchor(*answers: str) -> Action:
    texts = tuple(f"so \\boxed{{{a}}}" for a in answers)
    return Action(Mode.ANSWER, texts[0], samples=texts, calls=len(texts))


@pytest.mark.parametrize(
    "moves,path,final,escalated",
    [
        ([Action(Mode.ACCEPT)], "accept", "41", 0),
        ([Action(Mode.VERIFY), say(Mode.ANSWER, "42"), Action(Mode.ACCEPT)], "probe_accept", "41", 0),
        (
            [Action(Mode.VERIFY), say(Mode.ANSWER, "42"), Action(Mode.VERIFY), say(Mode.ANSWER, "42")],
            "probe_verify",
            "42",
            1,
        ),
        (
            [
                Action(Mode.ESCALATE),
                say(Mode.SPEAK, "42"),
                say(Mode.SPEAK, "42"),
                Action(Mode.SKIP),
                say(Mode.SPEAK, "41"),
            ],
            "escalate",
            "42",
            1,
        ),
        (
            [
                Action(Mode.VERIFY),
                say(Mode.ANSWER, "41"),
                Action(Mode.ESCALATE),
                say(Mode.SPEAK, "41"),
                say(Mode.SPEAK, "41"),
                Action(Mode.SKIP),
                Action(Mode.SKIP),
            ],
            "probe_escalate",
            "41",
            1,
        ),
    ],
)
def test_escalation_paths(moves, path, final, escalated):
    env = escalation_v0.raw_env(num_peers=2, debate_rounds=2, problems=[PROBLEM])
    env.reset(seed=0)
    env.step(anchor("41", "41", "42"))
    f = env.turn_context("controller").features
    assert f[PHASE] == 0 and f[ANCHOR_CONSISTENCY] == pytest.approx(2 / 3)
    assert (f[ROUTER_MARGIN], f[HAS_ROUTER_MARGIN]) == (pytest.approx(0.3), 1.0)
    run(env, moves)
    info = env.episode_record().info
    assert (info["path"], env.episode_record().final_answer, info["escalated"]) == (path, final, escalated)
    assert info["anchor_correct"] is False
    assert info["rescue"] == (escalated == 1 and final == "42") and info["harm"] is False
    assert (info["collab_correct"] is None) == (escalated == 0)


@pytest.mark.parametrize(("anchor_says", "probe_says", "final"), [("42", "42", "42"), ("42", "41", "42"),
                                                               (None, "42", "42")])
def test_a_verifier_stating_no_answer_leaves_the_answer_it_checked(anchor_says, probe_says, final):
    """A verifier reply cut before it answers ("Ben has 3 + 4 = 7 books now. Ben has 3 + 4 =") is
    no verdict: the anchor's answer stands (the probe's where the anchor stated none), and no harm
    is counted where the anchor was right."""
    env = escalation_v0.raw_env(num_peers=2, problems=[PROBLEM])
    env.reset(seed=0)
    first = anchor(anchor_says) if anchor_says else say(Mode.ANSWER, None, "I am not sure.")
    run(env, [first, Action(Mode.VERIFY), say(Mode.ANSWER, probe_says), Action(Mode.VERIFY),
              say(Mode.ANSWER, None, "Let me check both candidates.")])
    record = env.episode_record()
    assert (record.final_answer, record.correct, record.info["verifier_stated"]) == (final, True, False)
    assert record.info["harm"] is False and record.info["rescue"] is (anchor_says is None)


def test_escalation_probe_turn_role_and_features():
    env = escalation_v0.raw_env(num_peers=2, problems=[UNLABELED])
    env.reset(seed=0)
    run(env, [anchor("42"), Action(Mode.VERIFY)])
    assert env.turn_context("peer_0").role == "probe" and env.roles["peer_0"] == "peer"
    env.step(say(Mode.ANSWER, "42"))
    ctx = env.turn_context("controller")
    assert (
        ctx.features[PHASE] == 1 and ctx.features[PROBE_AGREES] == 1 and ctx.features[HAS_ROUTER_MARGIN] == 0
    )
    env.step(Action(Mode.VERIFY))
    assert env.turn_context("verifier").extras == {"anchor_answer": "42", "probe_answer": "42"}
    env.step(say(Mode.ANSWER, "42"))
    info = env.episode_record().info
    assert info["rescue"] is None and info["anchor_correct"] is None and env.episode_record().correct is None


CUT = "so 4 + 2 = 41. Now we add 1 to get 42 and"  # cut at the token limit; uncut it would read 41


def test_escalation_anchor_samples_cut_at_the_token_limit_state_no_answer():
    """Before, the env re-read every anchor sample without its cut flag, so two unfinished replies
    outvoted the finished one: the anchor's answer was 41, from text the model never finished."""
    env = escalation_v0.raw_env(num_peers=2, problems=[PROBLEM])
    env.reset(seed=0)
    texts = ("so \\boxed{42}", CUT, CUT)
    env.step(Action(Mode.ANSWER, texts[0], samples=texts, samples_truncated=(False, True, True), calls=3))
    anchor_turn = env.transcript[0]
    assert anchor_turn.answer == "42" and anchor_turn.samples_truncated == (False, True, True)
    assert env.turn_context("controller").features[ANCHOR_CONSISTENCY] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="2 samples_truncated flags for 3 samples"):
        env.reset(seed=0)
        env.step(Action(Mode.ANSWER, texts[0], samples=texts, samples_truncated=(False, True)))


def test_a_turns_cut_flags_survive_the_episode_log():
    from councilzoo.envs.types import EpisodeRecord

    env = escalation_v0.raw_env(num_peers=2, problems=[PROBLEM])
    env.reset(seed=0)
    texts = ("so \\boxed{42}", CUT)
    answer = Action(Mode.ANSWER, texts[0], samples=texts, samples_truncated=(False, True))
    run(env, [answer, Action(Mode.ACCEPT)])
    record = env.episode_record()
    again = EpisodeRecord.from_dict(record.to_dict())
    assert again.turns[0].samples_truncated == (False, True) and again.turns == record.turns


# ---- cohort ------------------------------------------------------------------------------------


def test_cohort_views_rewards_and_diagnostic_label_accuracy():
    from councilzoo.tasks import synthetic_problems

    problem = synthetic_problems("numeric", 1, seed=0)[0]
    env = cohort_v0.parallel_env(num_agents=2, reward_rule="ring", views=[0, 1], problems=[problem])
    obs, _ = env.reset(seed=0)
    assert env.turn_context("member_1").problem.question != problem.question
    assert obs["member_0"]["transcript"].startswith("Question: " + problem.question[:20])
    wrong = problem.metadata["distractors"][0]
    actions = {
        "member_0": Action(Mode.ANSWER, samples=(f"\\boxed{{{problem.answer}}}",) * 2 + ("\\boxed{1}",)),
        "member_1": Action(Mode.ANSWER, samples=(f"\\boxed{{{wrong}}}",) * 2),
    }
    _, rewards, _, _, infos = env.step(actions)
    assert infos["member_0"]["label"] == wrong and infos["member_0"]["label_correct"] is False
    assert infos["member_1"]["label"] == problem.answer and infos["member_1"]["label_correct"] is True
    assert infos["member_0"]["sample_rewards"] == [0.0, 0.0, 0.0] and rewards["member_1"] == 0.0


def test_cohort_member_samples_cut_at_the_token_limit_give_no_answer_and_no_reward():
    env = cohort_v0.parallel_env(num_agents=2, reward_rule="ring", problems=[PROBLEM])
    env.reset(seed=0)
    cut = Action(Mode.ANSWER, samples=(CUT, f"\\boxed{{{PROBLEM.answer}}}"), samples_truncated=(True, False))
    peer = Action(Mode.ANSWER, samples=("\\boxed{41}",) * 2)
    _, _, _, _, infos = env.step({"member_0": cut, "member_1": peer})
    assert infos["member_0"]["sample_answers"] == [None, PROBLEM.answer]
    assert infos["member_0"]["sample_rewards"] == [0.0, 0.0]  # uncut, the cut one read 41: member_1's label


def test_cohort_member_that_does_not_answer_abstains():
    """An unmasked mode (what parallel_seed_test samples) is an abstention, not a crash."""
    env = cohort_v0.parallel_env(num_agents=2, reward_rule="ring", problems=[PROBLEM])
    env.reset(seed=0)
    answer = Action(Mode.ANSWER, samples=(f"\\boxed{{{PROBLEM.answer}}}",) * 2, calls=2)
    _, rewards, done, _, infos = env.step({"member_0": int(Mode.SKIP), "member_1": answer})
    assert all(done.values()) and rewards == {"member_0": 0.0, "member_1": 0.0}
    assert infos["member_0"]["sample_answers"] == [] and infos["member_1"]["unlabeled"]  # taught by member_0
    assert infos["member_0"]["label"] == PROBLEM.answer  # member_1's own plurality
    skip, _ = env.episode_record().turns
    assert skip.mode is Mode.SKIP and skip.cost.calls == 0 and env.episode_record().cost.calls == 2


def test_cohort_episode_of_max_cycles_items_deals_the_deck_in_order():
    problems = synthetic_problems("numeric", 5, seed=3)
    env = cohort_v0.parallel_env(num_agents=2, max_cycles=3, problems=problems)
    single = cohort_v0.parallel_env(num_agents=2, problems=problems)
    env.reset(seed=4)
    single.reset(seed=4)
    player = ScriptedPlayer(seed=0, samples=2)
    for cycle in (1, 2, 3):
        assert env.turn_context("member_0").round == cycle and env.problem.id == single.problem.id
        obs, _, done, _, _ = env.step({a: player.act_one(env.turn_context(a)) for a in env.agents})
        assert env.episode_record().problem_id == single.problem.id
        assert all(done.values()) == (cycle == 3) and len(env.transcript) == 2 * cycle
        single.reset()
    assert env.agents == [] and [t.round for t in env.transcript] == [1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="max_cycles must be an integer >= 1"):
        cohort_v0.parallel_env(max_cycles=0)
    with pytest.raises(ValueError, match=r"tau .* must be in \[0, 1\], got 5"):
        cohort_v0.parallel_env(tau=5)


# ---- bad input ---------------------------------------------------------------------------------


def test_illegal_mode_names_agent_mode_and_legal_modes():
    env = review_v0.raw_env(num_agents=2, problems=[PROBLEM])
    env.reset(seed=0)
    with pytest.raises(IllegalModeError, match=r"'proposer_0'.*KEEP.*\['REFRESH'\]"):
        env.step(Action(Mode.KEEP))
    assert env.transcript == []  # nothing changed
    with pytest.raises(ValueError, match="agent 'proposer_0' sent mode 99"):
        env.step(99)
    with pytest.raises(ValueError, match="only Action fields"):
        env.step({"mode": 7, "utterance": "x"})


def test_penalty_wrapper_turns_illegal_mode_into_a_loss():
    env = IllegalModePenalty(debate_v0.env(num_agents=2, problems=[PROBLEM]), illegal_reward=-1.0)
    env.reset(seed=0)
    env.step(int(Mode.ESCALATE))
    assert all(env.terminations.values())
    assert env.rewards == {"peer_0": -1.0, "peer_1": 0.0} and env.infos["peer_1"]["forfeit"] == "peer_0"


def test_long_and_unprintable_utterances_are_truncated_and_sanitised():
    env = debate_v0.raw_env(num_agents=2, rounds=1, problems=[PROBLEM], max_utterance_chars=50)
    env.reset(seed=0)
    env.step(Action(Mode.SPEAK, "a\x00b\x1b[31m π " + "x" * 100))
    env.step({"mode": int(Mode.SPEAK), "text": "ok \\boxed{42}"})
    first, second = env.episode_record().turns
    assert first.truncated and len(first.text) == 50 and "\x00" not in first.text and "π" in first.text
    assert not second.truncated and second.answer == "42"
    text = env.observe("peer_0")["transcript"]
    assert env.observation_space("peer_0")["transcript"].contains(text) and "\\u03c0" in text


def test_cached_observations_follow_every_turn():
    """The transcript text and the debate vote are cached; a new turn or round must show at once."""
    env = debate_v0.raw_env(num_agents=2, rounds=3, problems=[PROBLEM])
    env.reset(seed=0)
    run(env, [say(Mode.SPEAK, "40"), say(Mode.SPEAK, "42")])
    obs = env.observe("peer_0")
    assert "answer=40" in obs["transcript"] and "answer=42" in obs["transcript"]
    assert obs["features"][debate_v0.TOP_SHARE] == pytest.approx(0.5)
    run(env, [say(Mode.SPEAK, "42"), Action(Mode.SKIP)])  # round 2: both now hold 42
    obs = env.observe("peer_0")
    assert obs["transcript"].count("answer=42") == 2 and "SKIP" in obs["transcript"]
    assert obs["features"][debate_v0.TOP_SHARE] == 1.0 and obs["features"][debate_v0.AGREES_WITH_TOP] == 1.0
    env = escalation_v0.raw_env(num_peers=2, problems=[PROBLEM])
    env.reset(seed=0)
    seen = [env.observe("controller")["transcript"]]
    for action in (say(Mode.ANSWER, "42"), Action(Mode.VERIFY), say(Mode.ANSWER, "41")):
        env.step(action)
        seen.append(env.observe("controller")["transcript"])
    assert [text.count("\n") for text in seen] == [0, 1, 2, 3]
    assert "answer=41" in seen[-1] and env.observe("controller")["features"][PROBE_AGREES] == 0.0


def test_order_enforcing_wrapper_forwards_state_and_keeps_the_checks():
    env = debate_v0.env(num_agents=2, problems=[PROBLEM])
    assert isinstance(env, OrderEnforcingWrapper) and str(env) == "debate_v0"
    for name in ("agents", "agent_selection", "rewards", "terminations", "truncations", "infos"):
        with pytest.raises(AttributeError, match="before reset"):
            getattr(env, name)
    env.reset(seed=0)
    raw = env.unwrapped
    for name in ("agents", "rewards", "_cumulative_rewards", "terminations", "truncations", "infos"):
        assert getattr(env, name) is getattr(raw, name)
    env.step(say(Mode.SPEAK, "42"))
    assert env.agent_selection == raw.agent_selection == "peer_1"


def test_masks_are_int8_and_only_the_acting_agent_has_legal_modes():
    env = escalation_v0.raw_env(problems=[PROBLEM])
    env.reset(seed=0)
    masks = {a: env.observe(a)["action_mask"] for a in env.agents}
    assert all(m.dtype == np.int8 for m in masks.values())
    assert [a for a, m in masks.items() if m.any()] == ["anchor"]
