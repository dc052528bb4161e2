"""IllegalModePenalty: turn an illegal mode into a loss instead of an exception.

By default every councilzoo game raises :class:`~councilzoo.envs.base.IllegalModeError` naming
the agent, the mode and the legal modes. Wrapped in ``IllegalModePenalty(env, illegal_reward)``
an illegal mode instead ends the episode: the offender receives ``illegal_reward``, the others 0,
and every agent's info holds ``{"forfeit": agent}``. (PettingZoo's TerminateIllegalWrapper
indexes the mask with the action, so it cannot take councilzoo's Action objects.)
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

from councilzoo.envs.base import IllegalModeError


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
