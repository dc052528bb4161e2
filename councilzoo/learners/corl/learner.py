"""``CoRL``: the Co-RL learner, whose members are separate worlds (Co-RL and its baselines).

Each round, every member n samples G completions of its own view of each item
(``paraphrase(problem, view_n)``); its *own label* is the plurality of its answers; member n is
rewarded against a *peer's* label under the rule named in the config (``ring``: member
(n+1) mod N, the release; ``peer_majority``: plurality of the other members' labels, ties ->
unlabeled), by playing ``councilzoo/cohort-v0``. Labels are paired by problem key, never by
surface form or position; gold answers only feed logged diagnostics. Each member trains on its
own rewards with its own TRL ``GRPOTrainer`` in its own world (``member.py``).

``CoRL(load_config(path, CoRLConfig)).train()`` starts the whole cohort on this node; the
baselines (``learners/baselines.py``) are ``CoRL`` subclasses with another reward rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from councilzoo.learners.base import Learner, register_learner
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.reward import CohortReward
from councilzoo.tasks import Problem

__all__ = ["CoRL"]


@register_learner
class CoRL(Learner):
    """The Co-RL cohort (see the module docstring); subclasses name another learner and may swap
    the rewards."""

    name = "corl"
    config_class = CoRLConfig

    @staticmethod
    def reward_functions(cfg: CoRLConfig, index: int, problems: Sequence[Problem], link) -> list:
        """The member's TRL reward functions."""
        return [CohortReward(cfg, index, problems, link)]

    def train(
        self, resume: bool = False, overwrite: bool = False, members: Sequence[int] | None = None,
        machines: Any = None, host: str | None = None,
    ) -> list[dict]:
        """Plan the cohort on ``machines`` (``placement.Machines``; default this machine) and run the
        worlds that start here (``launch_cohort``)."""
        from councilzoo.learners.corl.launch import launch_cohort

        return launch_cohort(self.cfg, self.spec(), members=members, resume=resume, overwrite=overwrite,
                             machines=machines, host=host)  # fmt: skip

    @classmethod
    def placement(cls, cfg: Any, machines: Any, resume: bool = False) -> Any:
        """The cohort's placement plan on ``machines`` (``placement.plan_cohort``)."""
        from councilzoo.learners.placement import plan_cohort

        return plan_cohort(cfg, cls.spec(), machines, resume)

    @classmethod
    def spec(cls) -> str:
        """``module:Class``: what the member worlds import."""
        return f"{cls.__module__}:{cls.__qualname__}"

    def resume_step(self) -> int | None:
        """The newest step every member has a checkpoint of (what the members agree to resume)."""
        from councilzoo.learners.engine import checkpoint_steps

        members = range(len(self.cfg.members))
        held = [set(checkpoint_steps(self.cfg.member_dir(i), verify=False)) for i in members]
        return max(set.intersection(*held), default=None)
