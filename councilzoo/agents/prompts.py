"""Role prompts and the rendering of a turn context into chat messages.

Every prompt text lives here, in ``ROLE_PROMPTS`` (system prompts per role) and ``INSTRUCTIONS``
(the closing request per role), so a config can override any of them by role name. Rendering
produces ``[{"role": "system", ...}, {"role": "user", ...}]``; the generator applies the
tokenizer's chat template. The user message holds the question (with lettered options for
multiple choice), what the others said most recently (answers and verdicts, each text cut to
``max_chars``), and the role's instruction.

Problems with images: the user message becomes a list of content parts in Hugging Face's chat
format, one ``{"type": "image", "image": ...}`` part per image ahead of the ``{"type": "text"}``
part, which every backend converts to its own form (processor inputs, vLLM multi-modal data,
OpenAI ``image_url`` parts). A text-only model gets the text alone, with a note saying how many
images it cannot see (``with_images=False``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from councilzoo.agents.controllers.contract import is_silent
from councilzoo.envs.types import Mode, Turn, TurnContext
from councilzoo.tasks import Problem, paraphrase

__all__ = [
    "LETTERS", "MAX_CHARS", "ROLE_PROMPTS", "INSTRUCTIONS", "CODE_INSTRUCTIONS", "latest_turns",
    "last_turn", "unseen_images_note", "render_messages", "member_prompt",
]

LETTERS = "ABCDEFGHIJ"
MAX_CHARS = 600  # per quoted utterance: long enough for a short solution, bounded for tiny models

ROLE_PROMPTS: dict[str, str] = {
    "peer": "You are one of several agents solving a problem together. Think step by step, weigh "
    "the other agents' answers critically, and keep your own answer if you still believe it.",
    "proposer": "You propose solutions to problems. Think step by step. When reviewers object, "
    "fix the mistake they point out.",
    "reviewer": "You review a proposed solution. Check every step carefully and judge whether "
    "its final answer is right.",
    "anchor": "You are a careful problem solver. Think step by step.",
    "probe": "You are a careful problem solver. Answer concisely.",
    "verifier": "You adjudicate between two candidate answers to a problem. Check both and pick "
    "the one that is right.",
    "member": "You are a careful problem solver. Think step by step.",
    "controller": "You decide how much collaboration a problem needs, given a first answer.",
}

INSTRUCTIONS: dict[str, str] = {
    "peer": "Give your final answer as \\boxed{...}.",
    "proposer": "Give your final answer as \\boxed{...}.",
    "reviewer": "End with exactly one line: 'Verdict: RIGHT' or 'Verdict: WRONG'.",
    "anchor": "Give your final answer as \\boxed{...}.",
    "probe": "Give only your final answer as \\boxed{...}.",
    "verifier": "Give the answer you judge right as \\boxed{...}.",
    "member": "Give your final answer as \\boxed{...}.",
    "controller": "Reply with one word: ACCEPT, VERIFY or ESCALATE.",
}


# The "concise" style, for small instruction models (SmolLM2-135M-Instruct) that ramble past their
# token budget when asked to think step by step and rarely write \boxed{}: asked for the number,
# they state one short sentence ("so he has 4 + 2 = 6 books now"), which ``extract_answer`` reads.
CONCISE_ROLE_PROMPTS: dict[str, str] = {
    **ROLE_PROMPTS,
    **dict.fromkeys(("anchor", "probe", "member", "proposer"), "You are a helpful assistant."),
    "peer": "You are one of several agents solving a problem together. Keep your own answer if you "
    "still believe it.",
}
CONCISE_INSTRUCTIONS: dict[str, str] = {
    **INSTRUCTIONS,
    **dict.fromkeys(("peer", "proposer", "anchor", "probe", "member"), "Answer with the number only."),
    "verifier": "Answer with the number you judge right only.",
}
# The "few_shot" style, for base models (Gemma-3-270M) that continue text rather than follow
# instructions: the answering roles see worked examples before the question, as earlier turns of
# the conversation, and answer in their form ("4 + 3 = 7. The answer is 7.").
FEW_SHOT_INSTRUCTIONS: dict[str, str] = {
    **CONCISE_INSTRUCTIONS,
    **dict.fromkeys(("peer", "proposer", "anchor", "probe", "member"), "End with: The answer is N."),
}
EXEMPLARS: tuple[tuple[str, str], ...] = (
    ("Mia has 4 stickers and gets 3 more. How many stickers does Mia have now?",
     "4 + 3 = 7. The answer is 7."),
    ("Leo has 9 marbles and gives away 5. How many marbles does Leo have left?",
     "9 - 5 = 4. The answer is 4."),
)
EXEMPLAR_ROLES = frozenset({"peer", "proposer", "anchor", "probe", "member"})
PROMPT_STYLES = {
    "default": (ROLE_PROMPTS, INSTRUCTIONS),
    "concise": (CONCISE_ROLE_PROMPTS, CONCISE_INSTRUCTIONS),
    "few_shot": (CONCISE_ROLE_PROMPTS, FEW_SHOT_INSTRUCTIONS),
}


def check_prompt_style(style: str) -> None:
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt style must be one of {list(PROMPT_STYLES)}, got {style!r}")


# Code problems are answered with a program: the answering roles' closing request says so.
CODE_INSTRUCTIONS: dict[str, str] = {
    role: "Give your final program in one ```python code block."
    for role in ("peer", "proposer", "anchor", "probe", "member")
} | {"verifier": "Give the program you judge right in one ```python code block."}


def _clip(text: str, max_chars: int) -> str:
    text = text.strip()
    return text if len(text) <= max_chars else "..." + text[-max_chars:]


def _question(problem) -> str:
    lines = [f"Question: {problem.question}"]
    lines += [f"({LETTERS[i]}) {choice}" for i, choice in enumerate(problem.choices)]
    return "\n".join(lines)


def latest_turns(transcript: tuple[Turn, ...], exclude: str) -> list[Turn]:
    """The latest speaking turn of every agent but ``exclude``, in order of first appearance."""
    latest: dict[str, Turn] = {}
    for turn in transcript:
        if turn.agent != exclude and not is_silent(turn.mode):
            latest[turn.agent] = turn
    return list(latest.values())


def last_turn(transcript: tuple[Turn, ...], role: str, agent: str | None = None) -> Turn | None:
    """The latest speaking turn of ``role`` (of ``agent`` when given), or None."""
    for turn in reversed(transcript):
        if turn.role == role and not is_silent(turn.mode) and (agent is None or turn.agent == agent):
            return turn
    return None


def _quote(turn: Turn, max_chars: int) -> str:
    return f"[{turn.agent} ({turn.role})]\n{_clip(turn.text, max_chars)}"


def _context_section(ctx: TurnContext, max_chars: int) -> str:
    """What the role needs to see of the transcript."""
    t = ctx.transcript
    if ctx.role == "reviewer":
        proposal = last_turn(t, "proposer")
        return f"Proposed solution:\n{_quote(proposal, max_chars)}" if proposal else "No proposal yet."
    if ctx.role == "proposer":
        own = last_turn(t, "proposer", ctx.agent)
        reviews = [x for x in t if x.role == "reviewer" and x.text and (own is None or x.round > own.round)]
        parts = [f"Your current proposal:\n{_clip(own.text, max_chars)}"] if own else []
        parts += [f"Review:\n{_quote(r, max_chars)}" for r in reviews]
        return "\n\n".join(parts)
    if ctx.role == "verifier":
        parts = []
        for name, role in (("Candidate 1", "anchor"), ("Candidate 2", "probe")):
            turn, key = last_turn(t, role), f"{role}_answer"
            if turn is not None:
                parts.append(f"{name}:\n{_clip(turn.text, max_chars)}")
            elif ctx.extras.get(key) is not None:
                parts.append(f"{name}: \\boxed{{{ctx.extras[key]}}}")
        return "\n\n".join(parts)
    if ctx.role == "controller":
        anchor = last_turn(t, "anchor")
        return f"First answer:\n{_quote(anchor, max_chars)}" if anchor else ""
    others = [x for x in latest_turns(t, ctx.agent) if x.text]
    if not others:
        return ""
    return "Answers from the other agents:\n\n" + "\n\n".join(_quote(x, max_chars) for x in others)


def unseen_images_note(count: int) -> str:
    """What a text-only model is told about the images it cannot see."""
    figures = "an image" if count == 1 else f"{count} images"
    return f"(The question refers to {figures} that you cannot see; answer from the text.)"


def _user_content(text: str, images: tuple, with_images: bool = True) -> str | list[dict]:
    """A user message's content: ``text`` alone, or the image parts followed by ``text``."""
    if not images:
        return text
    if not with_images:
        return f"{unseen_images_note(len(images))}\n{text}"
    return [{"type": "image", "image": image} for image in images] + [{"type": "text", "text": text}]


def render_messages(
    ctx: TurnContext,
    role_prompts: Mapping[str, str] | None = None,
    instructions: Mapping[str, str] | None = None,
    *,
    max_chars: int = MAX_CHARS,
    with_images: bool = True,
    style: str = "default",
) -> list[dict]:
    """Chat messages for ``ctx``: the role's system prompt, then question, context, instruction.

    ``role_prompts`` / ``instructions`` override the texts of ``style`` (``PROMPT_STYLES``) per
    role (code problems default to ``CODE_INSTRUCTIONS`` for the answering roles); an unknown role
    uses the ``peer`` texts. The ``few_shot`` style puts ``EXEMPLARS`` before the question of an
    answering role, as earlier user and assistant turns. The problem's images lead the user
    message (``with_images=False``: a note instead, for text-only models).
    """
    check_prompt_style(style)
    style_prompts, style_instructions = PROMPT_STYLES[style]
    prompts = {**style_prompts, **(role_prompts or {})}
    code = ctx.problem.kind == "code"
    defaults = {**style_instructions, **CODE_INSTRUCTIONS} if code else style_instructions
    closing = {**defaults, **(instructions or {})}
    section = _context_section(ctx, max_chars)
    instruction = closing.get(ctx.role, closing["peer"])
    parts = (_question(ctx.problem), section, instruction)
    user = "\n\n".join(p for p in parts if p)
    examples = []
    if style == "few_shot" and ctx.role in EXEMPLAR_ROLES and not code:
        for question, answer in EXEMPLARS:
            examples += [{"role": "user", "content": f"Question: {question}\n\n{instruction}"},
                         {"role": "assistant", "content": answer}]
    return [
        {"role": "system", "content": prompts.get(ctx.role, prompts["peer"])},
        *examples,
        {"role": "user", "content": _user_content(user, ctx.problem.images, with_images)},
    ]


def member_prompt(
    problem: Problem, view: int, with_images: bool = False, style: str = "default"
) -> list[dict]:
    """The chat prompt a cohort member answers: cohort-v0's member turn for its paraphrase view, in
    prompt ``style``. A vision-language member sees the problem's images; a text-only member the
    text and a note."""
    ctx = TurnContext(0, "member", "member", 0, paraphrase(problem, view), (), (Mode.ANSWER,), NO_FEATURES)
    return render_messages(ctx, with_images=with_images, style=style)


NO_FEATURES = np.zeros(3, dtype=np.float32)  # the member turn carries no controller features


def concise_messages(ctx: TurnContext) -> list[dict]:
    """``render_messages`` in the ``concise`` style: a renderer for configs that take an import path
    (TRACER's ``agents.render: councilzoo.agents.prompts:concise_messages``)."""
    return render_messages(ctx, style="concise")
