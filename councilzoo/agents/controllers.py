"""Controllers: the mode layer of an agent (speak or skip, keep or refresh, accept/verify/escalate).

A controller sees a batch of turn contexts and returns one legal ``Mode`` per context; it never
produces text. LLM and simulated agents delegate their mode choice to an optional controller and
then produce the utterance themselves (TRACER's two layers; COMED's escalation gate).

Contract for every controller: ``choose(contexts)[i] in contexts[i].legal_modes``. Write a new
one as any object with that method (TRACER's regret matcher and COMED's gate follow it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from councilzoo.envs.core import SILENT_MODES, Mode, TurnContext

__all__ = ["Controller", "default_mode", "is_silent", "FixedController", "RandomController"]

# A turn where speaking is legal speaks unless the role prefers one of these (in order).
_ROLE_DEFAULTS: dict[str, tuple[Mode, ...]] = {
    "proposer": (Mode.REFRESH,),
    "reviewer": (Mode.SPEAK,),
    "controller": (Mode.ESCALATE,),  # escalation gate without a learned controller: dense
}
_SPEAKING_ORDER = (Mode.ANSWER, Mode.SPEAK, Mode.REFRESH)


@runtime_checkable
class Controller(Protocol):
    """Maps a batch of turn contexts to one legal mode each, in order."""

    def choose(self, contexts: list[TurnContext]) -> list[Mode]: ...


def default_mode(context: TurnContext) -> Mode:
    """The mode an agent without a controller plays: speak whenever speaking is legal.

    Role defaults come first (a proposer refreshes, a reviewer speaks, an escalation gate
    escalates); then ANSWER, SPEAK, REFRESH; then the first legal mode.
    """
    legal = context.legal_modes
    if not legal:
        raise ValueError(f"agent {context.agent!r} (role {context.role!r}) has no legal mode")
    for mode in _ROLE_DEFAULTS.get(context.role, ()) + _SPEAKING_ORDER:
        if mode in legal:
            return mode
    return legal[0]


def is_silent(mode: Mode) -> bool:
    """Whether ``mode`` produces no utterance (and so no model call)."""
    return Mode(mode) in SILENT_MODES


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
