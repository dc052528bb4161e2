"""What a controller is: the mode layer of an agent (speak or skip, keep or refresh,
accept/verify/escalate), and the mode an agent without one plays.

A controller sees a batch of turn contexts and returns one legal ``Mode`` per context; it never
produces text. LLM and simulated agents delegate their mode choice to an optional controller and
then produce the utterance themselves (TRACER's two layers; COMED's escalation gate).

Contract for every controller: ``choose(contexts)[i] in contexts[i].legal_modes``. Write a new
one as any object with that method (TRACER's regret matcher and COMED's gate follow it).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from councilzoo.envs.types import SILENT_MODES, Mode, TurnContext

__all__ = ["Controller", "default_mode", "is_silent"]

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
