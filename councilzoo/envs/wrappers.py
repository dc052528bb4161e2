"""The order-enforcing wrapper every game's ``env()`` ships in, the cohort's AEC conversion, and
IllegalModePenalty.

``env()`` of debate-v0, review-v0 and escalation-v0 returns the raw game in
:class:`OrderEnforcing`: PettingZoo's ``OrderEnforcingWrapper`` with the same checks (state read
before ``reset`` raises AttributeError; ``step``, ``observe`` and ``agent_iter`` before ``reset``
fail), whose AEC state (``agents``, ``agent_selection``, ``rewards``, ``terminations``,
``truncations``, ``infos``) is read through properties instead of the ``__getattr__`` fallback,
which cost ~55 us per agent-step on a slow shared CPU core (``benchmarks/env_throughput.py``).
``cohort_v0.env()`` is the same wrapper around :class:`ParallelToAEC`, PettingZoo's
``parallel_to_aec`` conversion that also forwards councilzoo's ``turn_context(agent)`` and
``episode_record()`` to the parallel game, so every ``env()`` (and every PettingZoo wrapper
around one, which forwards unknown attributes) answers ``turn_context``.

By default every turn-based councilzoo game raises
:class:`~councilzoo.envs.council_env.IllegalModeError` naming the agent, the mode and the legal
modes. Wrapped in ``IllegalModePenalty(env, illegal_reward)`` an illegal mode instead ends the
episode: the offender receives ``illegal_reward``, the others 0, and every agent's info holds
``{"forfeit": agent}``. (PettingZoo's TerminateIllegalWrapper
indexes the mask with the action, so it cannot take councilzoo's Action objects.)
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

from councilzoo.envs.council_env import IllegalModeError
from councilzoo.envs.types import EpisodeRecord, TurnContext

__all__ = ["OrderEnforcing", "ParallelToAEC", "IllegalModePenalty"]


def _forward(name: str, *, before_reset: bool = False) -> property:
    """A read-only property returning ``self.env.<name>``; AttributeError before reset unless
    ``before_reset`` (OrderEnforcingWrapper's rule for that name)."""

    def get(self: OrderEnforcing) -> Any:
        if not (before_reset or self._has_reset):
            raise AttributeError(f"{name} cannot be accessed before reset")
        return getattr(self.env, name)

    return property(get, doc=f"The wrapped env's ``{name}``.")


class OrderEnforcing(OrderEnforcingWrapper):
    """PettingZoo's OrderEnforcingWrapper, with the AEC state that every step reads forwarded by
    properties (same values, same errors before reset) rather than by ``__getattr__``."""

    agents = _forward("agents")
    agent_selection = _forward("agent_selection")
    rewards = _forward("rewards")
    terminations = _forward("terminations")
    truncations = _forward("truncations")
    infos = _forward("infos")
    _cumulative_rewards = _forward("_cumulative_rewards", before_reset=True)

    def __str__(self) -> str:
        return str(self.env)  # as OrderEnforcingWrapper's own str: the game's name


class ParallelToAEC(parallel_to_aec_wrapper):
    """PettingZoo's parallel-to-AEC conversion, keeping the parallel game's councilzoo API in reach
    (the conversion forwards no attributes, so wrappers around it could not find them)."""

    def turn_context(self, agent: str) -> TurnContext:
        return self.env.turn_context(agent)

    def episode_record(self) -> EpisodeRecord:
        return self.env.episode_record()


class IllegalModePenalty(BaseWrapper):
    """End the episode with ``illegal_reward`` for the agent that chose an illegal mode."""

    def __init__(self, env: AECEnv, illegal_reward: float = -1.0) -> None:
        super().__init__(env)
        self.illegal_reward = float(illegal_reward)

    def step(self, action: Any) -> None:
        agent = self.env.agent_selection
        try:
            self.env.step(action)
        except IllegalModeError:  # raised before the game state changes
            self.env.unwrapped.forfeit(agent, self.illegal_reward)
