"""The kit's dynamics checkers catch what they promise: a controller that ignores its regrets, a
gate that is not monotone and a learner that peeks at labels each fail with a readable shrunk
example, and the correct ones pass (RegretMatcher and RegretMatchingController pass
``check_no_regret`` in tests/test_theory_regret_matching.py and tests/test_regret_controller.py;
the learned gates pass ``check_gate`` in tests/test_learned_gate.py; RENT passes
``check_learner`` as docs/testing.md's example, run by tests/test_docs_testing.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

from councilzoo.agents.controllers.comed_gate import ComedController, ComedThresholds
from councilzoo.agents.controllers.regret_matching import RegretMatchingController
from councilzoo.envs.types import Mode
from councilzoo.learners.baselines import RENT, IntrinsicReward
from councilzoo.testing.gates import check_gate
from councilzoo.testing.learners import check_learner
from councilzoo.testing.regret import as_matcher, check_no_regret

FITTED = ComedThresholds(tau_accept=0.8, delta=0.1, tau_direct=0.3, tau_escalate=0.6, delta_escalate=-0.2)
SIGNALS = ("anchor_consistency", "router_margin")


class OneState:
    """Every turn is one information state (keeps the shrinking quick)."""

    num_states, names = 1, ("all",)

    def __call__(self, context):
        return 0


class UniformController(RegretMatchingController):
    """Broken: plays uniform whatever its regrets say."""

    def policy(self, role, states):
        return np.full((len(states), 2), 0.5)


def test_a_controller_that_ignores_its_regrets_fails_with_the_shortest_losing_sequence():
    with pytest.raises(AssertionError) as failure:
        check_no_regret(lambda S, A: as_matcher(UniformController(OneState())), num_states=1, num_actions=2,
                        max_rounds=30)
    message = str(failure.value)
    # uniform play against one action paying 1 every round: regret T/2 > sqrt(2 T) from T = 9
    assert message.startswith("check_no_regret failed: state 0: external regret 4.5 > bound 4.24264")
    assert "(Delta=1.0, A=2, T=9)" in message and "Shrunk counterexample: UtilitySequence(T=9" in message


class InvertedGate(ComedController):
    """Broken: escalates where COMED accepts and accepts where it escalates."""

    def _mode(self, context):
        mode = super()._mode(context)
        return {Mode.ACCEPT: Mode.ESCALATE, Mode.ESCALATE: Mode.ACCEPT}.get(mode, mode)


class IllegalGate(ComedController):
    """Broken: answers after the probe, which the controller may not."""

    def _mode(self, context):
        return Mode.ANSWER if context.features[4] > 0.5 else super()._mode(context)


def test_comeds_gate_is_legal_and_monotone_in_its_signals():
    check_gate(ComedController(), monotone=SIGNALS)
    check_gate(ComedController(FITTED), monotone=SIGNALS)


def test_a_gate_that_is_not_monotone_fails_naming_the_signal_and_both_states():
    with pytest.raises(AssertionError) as failure:
        check_gate(InvertedGate(FITTED), monotone=SIGNALS)
    message = str(failure.value)
    assert message.startswith("check_gate failed: not monotone in ")
    assert "but the dearer ESCALATE at GateSignals(" in message
    assert "Boundary counterexample: GateCase(signals=GateSignals(" in message  # found before any random one


def test_an_illegal_decision_after_the_probe_fails():
    legal = r"after the probe: the gate chose <Mode.ANSWER: \d+>, not one of the legal modes \['ACCEPT',"
    with pytest.raises(AssertionError, match=legal):
        check_gate(IllegalGate(FITTED))


def test_comed_after_the_probe_in_states_it_never_probes():
    """After a probe, ``ComedController`` follows the after-probe rule alone: asked in every state,
    even where its gate would have accepted or escalated without probing, it is legal and monotone
    (it once ran the gate's rule again there and said VERIFY to an agreeing probe)."""
    check_gate(ComedController(FITTED), monotone=SIGNALS, after_probe="all")


# ---- learners -----------------------------------------------------------------------------------
CONFIG = {
    "members": [{"name": "qwen", "tiny_family": "qwen3", "view": 0}],
    "reward_rule": "entropy",
    "num_generations": 4,
    "prompts_per_step": 4,
    "max_completion_length": 12,
    "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32},
    "trainer": {"learning_rate": 1e-3},
}


class PeekingReward(IntrinsicReward):
    """RENT's entropy reward plus a bonus when the completion contains the gold answer."""

    def __init__(self, problems):
        super().__init__("entropy")
        self.gold = {p.id: p.answer for p in problems}

    def __call__(self, prompts, completions, completion_ids, problem_id, **kwargs):
        scores = super().__call__(prompts, completions, completion_ids, **kwargs)
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        return [s + float(self.gold[i] in t) for s, i, t in zip(scores, problem_id, texts, strict=True)]


class PeekingRENT(RENT):
    """Broken: says it is RENT (label-free) but its reward reads the gold answers."""

    @staticmethod
    def reward_functions(cfg, index, problems, link):
        return [PeekingReward(problems)]


@pytest.mark.slow
def test_a_learner_that_peeks_at_labels_fails(tmp_path):
    with pytest.raises(AssertionError) as failure:
        check_learner(PeekingRENT, CONFIG, tmp_path, label_free=True, settings=settings(max_examples=2))
    message = str(failure.value)
    assert message.startswith("check_learner (label-free) failed: PeekingRENT claims to be label-free")
    assert "Shrunk counterexample: Poison(kind=" in message


class EscalatesTheSurest(ComedController):
    """Broken: escalates its most confident anchors (every sample agrees) at the gate."""

    def _mode(self, context):
        f = np.asarray(context.features, dtype=float)
        if f[self._index["anchor_consistency"]] >= 1.0 and f[self._index["probe_done"]] <= 0.5:
            return Mode.ESCALATE
        return super()._mode(context)


def test_the_ci_profile_catches_a_gate_that_escalates_its_most_confident_anchors():
    """Ten random examples passed it (one sample is always fully consistent); the boundary cases
    raise consistency to its top from just below it."""
    ci = settings.get_profile("councilzoo-ci")  # the kit's ci profile: 10 derandomised examples
    with pytest.raises(AssertionError) as failure:
        check_gate(EscalatesTheSurest(FITTED), monotone=("anchor_consistency",), settings=ci)
    message = str(failure.value)
    assert message.startswith("check_gate failed: not monotone in anchor_consistency after the anchor: ")
    assert "but the dearer ESCALATE at GateSignals(samples=2, agreeing=2" in message
    assert "Boundary counterexample: GateCase(" in message


class OneRow:
    """Broken: one policy row whatever the number of states."""

    def __init__(self, num_states, num_actions):
        self.num_actions = num_actions

    def strategy(self, states):
        return np.full(self.num_actions, 1 / self.num_actions)

    def update(self, states, action_values):
        pass


def test_a_strategy_of_the_wrong_shape_is_a_contract_violation_not_a_numpy_error():
    with pytest.raises(AssertionError) as failure:
        check_no_regret(OneRow, self_play=False)
    message = str(failure.value)
    assert message.startswith("check_no_regret failed: round 0: strategy() returned array([1.]) "
                              "(shape (1,)), not 1 probability rows over 1 actions (shape (1, 1))")
    assert "AxisError" not in message
