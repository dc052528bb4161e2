"""``CohortLearner``: the learner whose members are cohort worlds (Co-RL and the baselines)."""

from __future__ import annotations

from collections.abc import Sequence

from councilzoo.learners.base import Learner
from councilzoo.learners.cohort.config import CohortConfig
from councilzoo.learners.cohort.reward import CohortReward
from councilzoo.tasks import Problem

__all__ = ["CohortLearner"]


class CohortLearner(Learner):
    """A learner whose members are cohort worlds; subclasses name it and may swap the rewards."""

    config_class = CohortConfig

    @staticmethod
    def reward_functions(cfg: CohortConfig, index: int, problems: Sequence[Problem], link) -> list:
        """The member's TRL reward functions."""
        return [CohortReward(cfg, index, problems, link)]

    def train(
        self, resume: bool = False, overwrite: bool = False, members: Sequence[int] | None = None
    ) -> list[dict]:
        from councilzoo.learners.cohort.launch import launch_cohort

        spec = f"{type(self).__module__}:{type(self).__qualname__}"  # what the member worlds import
        return launch_cohort(self.cfg, spec, members=members, resume=resume, overwrite=overwrite)

    def resume_step(self) -> int | None:
        """The newest step every member has a checkpoint of (what the members agree to resume)."""
        from councilzoo.learners.engine import checkpoint_steps

        members = range(len(self.cfg.members))
        held = [set(checkpoint_steps(self.cfg.member_dir(i), verify=False)) for i in members]
        return max(set.intersection(*held), default=None)
