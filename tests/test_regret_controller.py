"""RegretMatchingController: information states, legal play, train/eval play, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from councilzoo.agents.controllers.regret_matching import (
    RegretMatchingController,
    UntrainedStateError,
    VoteTimeState,
)
from councilzoo.envs.review_v0 import FEATURE_NAMES
from councilzoo.envs.types import Mode, TurnContext
from councilzoo.tasks import Problem
from councilzoo.testing.regret import as_matcher, check_no_regret

PROBLEM = Problem("q0", "1+1?", "2", kind="numeric")


def context(role="reviewer", round_=2, has_pending=1, score=0, last=0, legal=None, transcript_len=1):
    features = np.zeros(len(FEATURE_NAMES), np.float32)
    values = dict(round=round_, is_proposer=role == "proposer", has_pending=has_pending, vote_score=score,
                  is_last_proposal_round=last)
    for name, v in values.items():
        features[FEATURE_NAMES.index(name)] = v
    legal = legal or ((Mode.SKIP, Mode.SPEAK) if role == "reviewer" else (Mode.KEEP, Mode.REFRESH))
    return TurnContext(0, f"{role}_0", role, round_, PROBLEM, (None,) * transcript_len, legal, features,
                       {"episode": 0})


def test_vote_time_state_buckets_match_the_release():
    fn = VoteTimeState(max_abs_score=2)
    name = lambda **kw: fn.names[fn(context(**kw))]  # noqa: E731
    assert fn.num_states == 14 and len(set(fn.names)) == 14
    assert name(has_pending=0, round_=1) == "none|not_last"
    assert name(has_pending=0, round_=3) == "invalid|not_last"
    assert name(score=0) == "0|not_last"
    assert name(score=1, last=1) == "+1|last"
    assert name(score=-5) == "-2|not_last"  # clipped to max_abs_score
    rich = VoteTimeState(with_round=True, rounds=5)
    assert rich.num_states == 5 * 14 and rich.names[rich(context(round_=4, score=-1))] == "-1|not_last|r4"


def test_vote_time_state_rejects_features_it_cannot_read():
    with pytest.raises(ValueError, match="vote_score"):
        VoteTimeState(feature_names=("round", "has_pending"))


def test_choices_are_legal_and_forced_turns_are_not_decisions():
    ctrl = RegretMatchingController()
    forced = context(role="proposer", round_=1, legal=(Mode.REFRESH,))
    assert not ctrl.is_decision(forced)
    contexts = [forced] + [context(transcript_len=k) for k in range(50)]
    modes = ctrl.choose(contexts)
    assert modes[0] is Mode.REFRESH
    assert set(modes[1:]) == {Mode.SKIP, Mode.SPEAK}  # uniform strategy before any update
    assert ctrl.choose(contexts) == modes  # counter-based: the same turn draws the same
    ctrl.epoch += 1
    assert ctrl.choose(contexts) != modes


def test_training_plays_the_current_strategy_and_evaluation_the_average():
    ctrl = RegretMatchingController(variant="rm")
    s = ctrl.state(context())
    ctrl.update("reviewer", [s], [[0.0, 1.0]])   # current: always SPEAK; average: uniform (first play)
    ctrl.update("reviewer", [s], [[1.0, 0.0]])   # R = (0.5, 0.5) - (0, 1) ... average leans to SPEAK
    current = ctrl.matchers["reviewer"].strategy([s])[0]
    average = ctrl.matchers["reviewer"].average_strategy([s])[0]
    many = [context(transcript_len=k) for k in range(400)]
    speak = np.mean([m is Mode.SPEAK for m in ctrl.choose(many)])
    assert abs(speak - current[1]) < 0.08
    ctrl.eval()
    assert set(ctrl.choose(many)) == {Mode(ctrl.roles["reviewer"][int(np.argmax(average))])}


def test_argmax_ties_are_broken_at_random_not_towards_silence():
    ctrl = RegretMatchingController()
    s = ctrl.state(context())
    ctrl.update("reviewer", [s], [[1.0, 1.0]])  # average strategy stays exactly uniform
    ctrl.eval()
    assert set(ctrl.choose([context(transcript_len=k) for k in range(40)])) == {Mode.SKIP, Mode.SPEAK}


def test_untrained_states_are_reported_or_refused():
    ctrl = RegretMatchingController().eval()
    ctrl.choose([context(score=1), context(score=1, transcript_len=3)])
    state = ctrl.state(context(score=1))
    assert ctrl.untrained_hits["reviewer"][state] == 2 and ctrl.untrained_hits["reviewer"].sum() == 2
    strict = RegretMatchingController(untrained="error").eval()
    with pytest.raises(UntrainedStateError, match=r"\+1\|not_last"):
        strict.choose([context(score=1)])


def test_state_dict_round_trip_is_exact():
    a = RegretMatchingController(variant="rm", averaging="linear", seed=3)
    rng = np.random.default_rng(0)
    for role in a.roles:
        states = rng.integers(a.state_fn.num_states, size=30)
        a.update(role, states, rng.normal(size=(30, 2)))
    a.epoch = 7
    b = RegretMatchingController(seed=3)
    b.load_state_dict(a.state_dict())
    for key, value in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[key], value)
    contexts = [context(score=k % 3 - 1, transcript_len=k) for k in range(30)]
    assert a.choose(contexts) == b.choose(contexts)
    assert a.report() == b.report()


def test_a_role_is_a_no_regret_learner():
    """Fed any bounded value sequence in all 14 states (its training play), the reviewer's
    external regret stays within Delta sqrt(2 T); two copies in self-play approach a CCE. (The
    proposer's matcher is the same code with other modes.)"""
    check_no_regret(lambda S, A: as_matcher(RegretMatchingController(), "reviewer"),
                    num_states=VoteTimeState().num_states, num_actions=2)
