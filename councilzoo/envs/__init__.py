"""The councilzoo games and their registry.

``make(env_id, **kwargs)`` builds a game by id in its AEC form (the module's ``env()``), for
every id; ``make_parallel(env_id, **kwargs)`` builds the parallel form of a game that has one
(``councilzoo/cohort-v0``: ``cohort_v0.parallel_env``). Importing this package also registers every
game with PettingZoo's own registry (``pettingzoo.make("aec", "councilzoo/debate-v0")``; the cohort
game under both "parallel" and "aec").
"""

from __future__ import annotations

import inspect
from typing import Any

import pettingzoo

from councilzoo.envs import cohort_v0, debate_v0, escalation_v0, review_v0
from councilzoo.envs.council_env import IllegalModeError, TableSettings
from councilzoo.envs.rewards import RULES, RewardResult, compute_rewards
from councilzoo.envs.types import NUM_MODES, Action, Cost, EpisodeRecord, Mode, Turn, TurnContext
from councilzoo.envs.wrappers import IllegalModePenalty

GAMES = {
    "councilzoo/debate-v0": debate_v0.env,
    "councilzoo/review-v0": review_v0.env,
    "councilzoo/escalation-v0": escalation_v0.env,
    "councilzoo/cohort-v0": cohort_v0.env,
}
PARALLEL_GAMES = {"councilzoo/cohort-v0": cohort_v0.parallel_env}
_RAW = {  # the game classes, whose signatures list the accepted keywords
    "councilzoo/debate-v0": debate_v0.raw_env,
    "councilzoo/review-v0": review_v0.raw_env,
    "councilzoo/escalation-v0": escalation_v0.raw_env,
    "councilzoo/cohort-v0": cohort_v0.parallel_env,
}


def _accepted_kwargs(env_id: str) -> list[str]:
    """The keyword arguments the game ``env_id`` accepts: its own, then ``TableSettings``' where it
    passes those on (``**table``)."""
    _check_env_id(env_id)
    params = inspect.signature(_RAW[env_id]).parameters.values()
    own = [p.name for p in params if p.name != "self" and p.kind is not p.VAR_KEYWORD]
    passed_on = any(p.kind is p.VAR_KEYWORD for p in params)
    return own + (list(TableSettings.__annotations__) if passed_on else [])


def _check_env_id(env_id: str) -> None:
    if env_id not in GAMES:
        raise ValueError(f"unknown env id {env_id!r}; known ids: {sorted(GAMES)}")


def _check_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    accepted = _accepted_kwargs(env_id)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise TypeError(f"{env_id} got unknown keyword argument(s) {unknown}; accepted: {accepted}")


def make(env_id: str, **kwargs: Any):
    """The AEC form of the game ``env_id`` with ``kwargs``; unknown ids and keywords fail before any
    work."""
    _check_kwargs(env_id, kwargs)
    return GAMES[env_id](**kwargs)


def make_parallel(env_id: str, **kwargs: Any):
    """The parallel form of the game ``env_id``; a ValueError for the turn-based games."""
    _check_kwargs(env_id, kwargs)
    if env_id not in PARALLEL_GAMES:
        raise ValueError(
            f"{env_id} is turn-based and has no parallel form; games with one: {sorted(PARALLEL_GAMES)}"
        )
    return PARALLEL_GAMES[env_id](**kwargs)


for _id, _module in (
    ("councilzoo/debate-v0", "debate_v0"),
    ("councilzoo/review-v0", "review_v0"),
    ("councilzoo/escalation-v0", "escalation_v0"),
    ("councilzoo/cohort-v0", "cohort_v0"),
):
    if _id not in pettingzoo.aec_registry:
        pettingzoo.register("aec", _id, entry_point=f"councilzoo.envs.{_module}:env")
if "councilzoo/cohort-v0" not in pettingzoo.parallel_registry:
    pettingzoo.register(
        "parallel", "councilzoo/cohort-v0", entry_point="councilzoo.envs.cohort_v0:parallel_env"
    )

__all__ = [
    "GAMES",
    "PARALLEL_GAMES",
    "NUM_MODES",
    "RULES",
    "Action",
    "Cost",
    "EpisodeRecord",
    "IllegalModeError",
    "IllegalModePenalty",
    "Mode",
    "RewardResult",
    "Turn",
    "TurnContext",
    "cohort_v0",
    "compute_rewards",
    "debate_v0",
    "escalation_v0",
    "make",
    "make_parallel",
    "review_v0",
]
