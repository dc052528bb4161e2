"""Co-RL: cooperative label-free RL across a cohort of decoupled models.

Each round, every member n samples G completions of its own view of each item
(``paraphrase(problem, view_n)``); its *own label* is the plurality of its answers; member n is
rewarded against a *peer's* label under the rule named in the config (``ring``: member
(n+1) mod N, the release; ``peer_majority``: plurality of the other members' labels, ties ->
unlabeled), by playing ``councilzoo/cohort-v0``. Labels are paired by problem key, never by
surface form or position; gold answers only feed logged diagnostics. Each member trains on its
own rewards with its own TRL ``GRPOTrainer`` in its own world (``learners/cohort/``,
``learners/cohort/member.py``).

``CoRL(load_config(path, CoRLConfig)).train()`` starts the whole cohort on this node.
"""

from __future__ import annotations

from dataclasses import dataclass

from councilzoo.learners.base import register_learner
from councilzoo.learners.cohort.config import CohortConfig
from councilzoo.learners.cohort.learner import CohortLearner

__all__ = ["CoRLConfig", "CoRL"]


@dataclass
class CoRLConfig(CohortConfig):
    """Co-RL: N >= 2 members rewarded by peer labels (``ring`` or ``peer_majority``)."""


@register_learner
class CoRL(CohortLearner):
    """The Co-RL cohort (see the module docstring)."""

    name = "corl"
    config_class = CoRLConfig
