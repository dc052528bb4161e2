"""From model text to an ``Action``: mode, answer and verdict, tolerant of markdown and noise.

The answer and the verdict are read with ``councilzoo.tasks.extract_answer`` and
``extract_verdict`` (the same code that grades), so an agent and an env never disagree about what
a text says. A text that states nothing gives an ``Action`` whose answer/verdict is None: bad
model output is data, never an exception.

Mode words (for roles whose text chooses the mode, such as an LLM escalation gate) are read from
an explicit label ("Decision: ESCALATE", "Action: **skip**"), a bold word, or a word in capitals;
the last one that names a legal mode wins. Without any, the caller's mode (or the default mode of
the role) is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from councilzoo.agents.controllers.contract import is_silent
from councilzoo.envs.types import Action, Mode
from councilzoo.tasks import extract_answer, extract_verdict

__all__ = ["VERDICT_ROLES", "parse_mode", "parse_action"]

# Roles whose utterance is a verdict on someone else's answer rather than an answer of their own.
VERDICT_ROLES = frozenset({"reviewer"})

_MODE_NAMES = "|".join(m.name for m in Mode)
_MODE_RES = (
    re.compile(
        rf"(?:decision|action|mode|choice|choose|i\s+choose)\s*(?:\*\*|__)?\s*[:=\-]?\s*(?:\*\*|__)?\s*"
        rf"\b({_MODE_NAMES})\b",
        re.IGNORECASE,
    ),
    re.compile(rf"(?:\*\*|__|`)\s*({_MODE_NAMES})[.!]?\s*(?:\*\*|__|`)", re.IGNORECASE),
    re.compile(rf"\b({_MODE_NAMES})\b"),
    re.compile(rf"^[\s*_#>`]*({_MODE_NAMES})[\s*_.!`]*$", re.IGNORECASE | re.MULTILINE),
)


def parse_mode(text: str | None, legal_modes: Sequence[Mode]) -> Mode | None:
    """The last legal mode ``text`` names explicitly, or None."""
    if not isinstance(text, str) or not legal_modes:
        return None
    legal = {Mode(m).name for m in legal_modes}
    best: tuple[int, str] | None = None
    for pattern in _MODE_RES:
        for match in pattern.finditer(text):
            name = match.group(1).upper()
            if name in legal and (best is None or match.end() > best[0]):
                best = (match.end(), name)
    return Mode[best[1]] if best else None


def parse_action(
    text: str | None,
    role: str,
    kind: str,
    *,
    mode: Mode | None = None,
    legal_modes: Sequence[Mode] = (),
    truncated: bool = False,
) -> Action:
    """Read ``text`` (a model's reply in ``role``) as an action for a problem of ``kind``.

    ``mode`` is the mode the agent already chose (the usual case: a controller or the default
    picked it before generating). Without it the mode is read from the text among
    ``legal_modes``, falling back to the first legal speaking mode. Reviewers yield a verdict,
    every other role an answer; ``truncated`` (the reply hit the token limit) keeps the
    unfinished last sentence from stating one.
    """
    text = text if isinstance(text, str) else ""
    if mode is None:
        mode = parse_mode(text, legal_modes) if legal_modes else None
        if mode is None:
            speaking = [m for m in legal_modes if not is_silent(m)]
            mode = Mode(speaking[0] if speaking else (legal_modes[0] if legal_modes else Mode.SPEAK))
    if role in VERDICT_ROLES:
        return Action(mode=Mode(mode), text=text, verdict=extract_verdict(text), truncated=truncated)
    answer = extract_answer(text, kind, truncated=truncated)
    return Action(mode=Mode(mode), text=text, answer=answer, truncated=truncated)
