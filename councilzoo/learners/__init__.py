"""Learners: the learner contract, Co-RL, baselines and TRACER on TRL's GRPOTrainer, imported
lazily (they pull in torch and transformers). ``RolloutEngine`` is re-exported from
``councilzoo.rollout``, the layer evaluation and learners share."""

from __future__ import annotations

from councilzoo.lazy import lazy_attributes
from councilzoo.rollout import RolloutEngine, RolloutStats

_MODULES = {
    "councilzoo.learners.base": ("Learner", "register_learner", "get_learner", "learner_names"),
    "councilzoo.learners.corl.config": ("CoRLConfig", "MemberConfig", "EvalConfig"),
    "councilzoo.learners.data": ("DataConfig", "load_items"),
    "councilzoo.learners.corl.reward": ("CohortReward",),
    "councilzoo.learners.corl.learner": ("CoRL",),
    "councilzoo.learners.corl.member": ("run_member",),
    "councilzoo.learners.corl.launch": ("launch_cohort", "CohortFailed"),
    "councilzoo.learners.baselines": ("Baseline", "BaselineConfig", "GRPO", "TTRL", "RENT", "INTUITOR"),
    "councilzoo.learners.tracer.learner": ("Tracer", "TracerLearner"),
    "councilzoo.learners.tracer.config": ("TracerConfig",),
    "councilzoo.learners.checkpoint": ("save_checkpoint", "load_checkpoint", "latest_checkpoint"),
    "councilzoo.learners.corl.link": ("CohortLink", "DistributedConfig", "PeerFailure"),
    "councilzoo.learners.logging": ("MetricsLogger",),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = ["RolloutEngine", "RolloutStats", *_LAZY]
