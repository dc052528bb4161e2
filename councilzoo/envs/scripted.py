"""A scripted, model-free player for tests, benchmarks and examples.

``ScriptedPlayer(seed, p_correct)`` picks a uniformly random legal mode and, for speaking modes,
writes a short utterance that states the gold answer with probability ``p_correct`` (else a
distractor or a wrong number) and, for reviewers, a RIGHT/WRONG verdict on the pending proposal
that is correct with probability ``p_correct``. It reads only the ``TurnContext`` every agent gets,
draws from one seeded ``numpy.random.Generator`` and is not a model of any LLM (see
``councilzoo.agents.SimulatedAgent`` for calibrated simulations).
"""

from __future__ import annotations

import numpy as np

from councilzoo.envs.types import SILENT_MODES, Action, Mode, TurnContext
from councilzoo.tasks import answers_equivalent, format_answer

__all__ = ["ScriptedPlayer", "play_episode"]


class ScriptedPlayer:
    """Random legal modes, answers right with probability ``p_correct``; ``samples`` texts for anchors
    and cohort members."""

    def __init__(self, seed: int = 0, p_correct: float = 0.6, samples: int = 3) -> None:
        self.rng = np.random.default_rng(seed)
        self.p_correct, self.samples = p_correct, samples

    def _answer_text(self, ctx: TurnContext) -> str:
        problem = ctx.problem
        answer = problem.answer
        if answer is None or self.rng.random() >= self.p_correct:
            wrong = problem.metadata.get("distractors") or ("0",)
            answer = wrong[int(self.rng.integers(len(wrong)))]
        return f"Working it through, the result follows. {format_answer(str(answer), problem.kind)}"

    def _verdict_text(self, ctx: TurnContext) -> str:
        pending = ctx.extras.get("pending_answer")
        right = answers_equivalent(pending, ctx.problem.answer, ctx.problem.kind)
        if self.rng.random() >= self.p_correct:
            right = not right
        return f"I checked each step. Verdict: {'RIGHT' if right else 'WRONG'}"

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        return [self.act_one(ctx) for ctx in contexts]

    def act_one(self, ctx: TurnContext) -> Action:
        mode = Mode(ctx.legal_modes[int(self.rng.integers(len(ctx.legal_modes)))])
        if mode in SILENT_MODES:
            return Action(mode)
        if ctx.role == "reviewer":
            return Action(mode, self._verdict_text(ctx), prompt_tokens=40, completion_tokens=12, calls=1)
        if ctx.role in ("anchor", "member"):
            texts = tuple(self._answer_text(ctx) for _ in range(self.samples))
            return Action(
                mode,
                texts[0],
                samples=texts,
                prompt_tokens=40 * len(texts),
                completion_tokens=20 * len(texts),
                calls=len(texts),
            )
        return Action(mode, self._answer_text(ctx), prompt_tokens=60, completion_tokens=20, calls=1)


def play_episode(env, player: ScriptedPlayer, seed: int | None = None, options: dict | None = None) -> int:
    """Play one AEC episode of ``env`` with ``player``; returns the number of agent-steps taken."""
    env.reset(seed=seed, options=options)
    raw = env.unwrapped
    steps = 0
    for agent in env.agent_iter():
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            continue
        env.step(player.act_one(raw.turn_context(agent)))
        steps += 1
    return steps
