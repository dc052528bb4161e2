"""Controllers: the mode layer of an agent, one module per kind of decision.

- ``contract``: the ``Controller`` protocol (``choose(contexts) -> modes``) and ``default_mode``;
- ``baselines``: ``FixedController`` and ``RandomController``;
- ``regret_matching``: TRACER's speak/skip and keep/refresh, one regret matcher per role;
- ``comed_gate``: COMED's escalation gate, accept / verify / escalate by thresholds on cheap signals;
- ``learned_gates``: the same escalation decision by gates fitted on a dev split.
"""

from councilzoo.agents.controllers.baselines import FixedController, RandomController
from councilzoo.agents.controllers.comed_gate import ComedController, ComedThresholds
from councilzoo.agents.controllers.contract import Controller, default_mode, is_silent
from councilzoo.agents.controllers.learned_gates import LearnedGateController, LogisticGate, RegretGate
from councilzoo.agents.controllers.regret_matching import RegretMatchingController, VoteTimeState

__all__ = [
    "Controller", "default_mode", "is_silent", "FixedController", "RandomController",
    "RegretMatchingController", "VoteTimeState", "ComedController", "ComedThresholds",
    "LearnedGateController", "LogisticGate", "RegretGate",
]
