"""Learners: the rollout engine; the learner contract, Co-RL, baselines, TRACER and checkpoints are
imported lazily (they pull in torch and transformers)."""

from __future__ import annotations

import importlib
from typing import Any

from councilzoo.learners.rollout import RolloutEngine, RolloutStats, record_from_dict

_MODULES = {
    "councilzoo.learners.base": ("Learner", "register_learner", "get_learner", "learner_names"),
    "councilzoo.learners.cohort": (
        "CohortLearner", "CohortConfig", "MemberConfig", "DataConfig", "CohortReward", "run_member",
    ),
    "councilzoo.learners.launch": ("launch_cohort", "CohortFailed"),
    "councilzoo.learners.corl": ("CoRL", "CoRLConfig"),
    "councilzoo.learners.baselines": ("Baseline", "BaselineConfig", "GRPO", "TTRL", "RENT", "INTUITOR"),
    "councilzoo.learners.tracer": ("Tracer", "TracerLearner"),
    "councilzoo.learners.tracer_config": ("TracerConfig",),
    "councilzoo.learners.checkpoint": ("save_checkpoint", "load_checkpoint", "latest_checkpoint"),
    "councilzoo.learners.distributed": ("CohortLink", "DistributedConfig", "PeerFailure"),
    "councilzoo.learners.logging": ("MetricsLogger",),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'councilzoo.learners' has no attribute {name!r}")


__all__ = ["RolloutEngine", "RolloutStats", "record_from_dict", *_LAZY]
