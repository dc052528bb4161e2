"""The rollout layer: plays games with agents, batched across environments, for evaluation and
learners alike (``engine.RolloutEngine``), and logs finished episodes (``log.EpisodeLog``)."""

from councilzoo.rollout.engine import RolloutEngine, RolloutStats, TurnHook
from councilzoo.rollout.log import EpisodeLog

__all__ = ["EpisodeLog", "RolloutEngine", "RolloutStats", "TurnHook"]
