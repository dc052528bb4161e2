"""Learners: the rollout engine, and (imported lazily, they pull in torch/TRL) Co-RL and TRACER."""

from __future__ import annotations

import importlib
from typing import Any

from councilzoo.learners.rollout import RolloutEngine, RolloutStats, record_from_dict

_LAZY = {"CoRL": "councilzoo.learners.corl", "Tracer": "councilzoo.learners.tracer"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'councilzoo.learners' has no attribute {name!r}")


__all__ = ["RolloutEngine", "RolloutStats", "record_from_dict", *_LAZY]
