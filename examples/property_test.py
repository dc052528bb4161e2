"""Property-test your own controller and gate with councilzoo.testing (hypothesis shrinks failures).

    python examples/property_test.py

Two pieces a researcher writes: a regret matcher (the learning rule inside a TRACER-style
controller) and an escalation gate (a COMED-style rule deciding, after the anchor, whether to
accept, verify with a peer probe, or escalate to a debate). ``check_no_regret`` drives the matcher
on generated value sequences and in self-play and recomputes its regret from the policies it
played; ``check_gate`` plays the real ``escalation-v0`` game on generated signals. A checker
returns quietly or raises ``AssertionError`` with the smallest counterexample hypothesis found.
"""

import numpy as np

from councilzoo.envs.escalation_v0 import FEATURE_NAMES
from councilzoo.envs.types import Mode
from councilzoo.testing import load_profile
from councilzoo.testing.gates import check_gate
from councilzoo.testing.regret import check_no_regret

load_profile("councilzoo-ci")  # bounded example counts; "councilzoo-deep" searches longer


class MyRegretMatcher:
    """Plain regret matching (Hart & Mas-Colell): play each action in proportion to its positive regret."""

    def __init__(self, num_states: int, num_actions: int):
        self.regrets = np.zeros((num_states, num_actions))

    def strategy(self, states):
        positive = np.maximum(self.regrets[states], 0.0)
        total = positive.sum(axis=1, keepdims=True)
        uniform = np.full_like(positive, 1.0 / positive.shape[1])
        return np.where(total > 0, positive / np.where(total > 0, total, 1.0), uniform)

    def update(self, states, action_values):
        played = (self.strategy(states) * action_values).sum(axis=1, keepdims=True)
        np.add.at(self.regrets, states, action_values - played)


CONSISTENCY, PROBE_DONE, PROBE_AGREES = (FEATURE_NAMES.index(n)
                                         for n in ("anchor_consistency", "probe_done", "probe_agrees"))


class ConsistencyGate:
    """Accept a consistent anchor, escalate a split one, probe in between; after the probe,
    accept if the probe agreed, else escalate."""

    def __init__(self, accept_at=0.8, escalate_below=0.4, reversed_=False):
        self.accept_at, self.escalate_below, self.reversed = accept_at, escalate_below, reversed_

    def choose(self, contexts):
        return [self._mode(np.asarray(ctx.features)) for ctx in contexts]

    def _mode(self, f):
        if f[PROBE_DONE] > 0.5:
            return Mode.ACCEPT if f[PROBE_AGREES] > 0.5 else Mode.ESCALATE
        consistency = 1.0 - f[CONSISTENCY] if self.reversed else f[CONSISTENCY]  # the bug to catch
        if consistency >= self.accept_at:
            return Mode.ACCEPT
        return Mode.ESCALATE if consistency < self.escalate_below else Mode.VERIFY


check_no_regret(MyRegretMatcher)
print("MyRegretMatcher: no state's regret above Delta sqrt(A T); self-play reaches a CCE")

check_gate(ConsistencyGate(), monotone=("anchor_consistency",), after_probe="all")
print("ConsistencyGate: legal decisions, never dearer when the anchor is more consistent")

try:
    check_gate(ConsistencyGate(reversed_=True), monotone=("anchor_consistency",))
except AssertionError as failure:
    print("a gate that reads consistency backwards fails:", str(failure).splitlines()[0])
else:
    raise SystemExit("the reversed gate should have failed")
