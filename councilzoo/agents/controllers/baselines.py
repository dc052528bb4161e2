"""Controllers that learn nothing, the baselines of the learned ones: a fixed mode per role, and
a seeded coin between speaking and staying silent."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from councilzoo.agents.controllers.contract import default_mode, is_silent
from councilzoo.envs.types import Mode, TurnContext

__all__ = ["FixedController", "RandomController"]


class FixedController:
    """Always the same mode, optionally per role; falls back to ``default_mode`` when illegal.

    ``FixedController(Mode.SKIP)`` never reviews; ``FixedController({"reviewer": Mode.SKIP,
    "proposer": Mode.KEEP})`` sets one mode per role. A sequence per role cycles by round:
    ``{"reviewer": (Mode.SPEAK, Mode.SKIP)}`` alternates speaking and skipping.
    """

    def __init__(self, modes: Mode | Mapping[str, Mode | tuple[Mode, ...]]):
        self.modes = modes

    def _wanted(self, context: TurnContext) -> Mode | None:
        modes = self.modes.get(context.role) if isinstance(self.modes, Mapping) else self.modes
        if isinstance(modes, (tuple, list)):
            return Mode(modes[context.round % len(modes)]) if modes else None
        return None if modes is None else Mode(modes)

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        out = []
        for context in contexts:
            wanted = self._wanted(context)
            out.append(wanted if wanted in context.legal_modes else default_mode(context))
        return out


class RandomController:
    """Speaks (or refreshes, escalates ...) with probability ``p``, else stays silent; seeded.

    Among the legal modes, the speaking ones share ``p`` and the silent ones ``1 - p`` (uniformly
    within each group); with only one group legal it is played. Draws come from one
    ``numpy.random.Generator`` seeded by ``seed``, in call order.
    """

    def __init__(self, p: float = 0.5, seed: int = 0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomController: p must be a probability in [0, 1], got {p}")
        self.p = p
        self.rng = np.random.default_rng(seed)

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        out = []
        draws = self.rng.random((len(contexts), 2))
        for context, (u, v) in zip(contexts, draws, strict=True):
            speaking = [m for m in context.legal_modes if not is_silent(m)]
            silent = [m for m in context.legal_modes if is_silent(m)]
            group = speaking if (u < self.p and speaking) or not silent else silent
            out.append(group[int(v * len(group))])
        return out
