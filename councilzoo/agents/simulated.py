"""Calibrated simulated agents: fast, seeded stand-ins for LLMs in science and tests.

A ``SimulatedAgent`` plays every role of every councilzoo game (peer, proposer, reviewer, anchor,
probe, verifier, member, escalation controller) and emits its answers as text through
``format_answer``, so envs grade them with the same code as LLM output.

Correctness of an attempt (latent-Gaussian model). For attempt ``t`` of agent ``i`` on problem ``q``

    z = sqrt(w) z_d(q) + sqrt(1 - w) [sqrt(c_i) z_q + sqrt(1 - c_i) (sqrt(1 - s) a_iq + sqrt(s) e_iqt)]

with every component standard normal: ``z_d`` from the problem's difficulty, ``z_q`` a latent
"trap" shared by all agents, ``a_iq`` the agent's stable view of the problem and ``e_iqt`` fresh
noise per attempt. The attempt is right iff ``z < Phi^-1(skill)``. So ``z`` is N(0, 1) and the
accuracy of any single attempt is ``skill`` on problems whose difficulty is distributed like
``synthetic_problems``' default (mean 0.5, sd 0.15: ``z_d = (d - 0.5) / 0.15``); harder sets score
lower. Problems without a difficulty draw ``z_d`` from their id. ``w = difficulty_weight``,
``c_i = correlation``, ``s = resample_noise`` (how much a new attempt or sample differs).

Wrong answers. A wrong attempt states the problem's first distractor (shared by every agent)
with probability ``correlation``, else an answer drawn uniformly from a wide pool (the other
distractors and perturbed numbers). Raising ``correlation`` therefore raises both the chance
that agents are wrong together and that they agree on the same wrong answer: the shared-wrong
rate is monotone in it, which is what makes dense collaboration collapse.

Collaboration behaviour. A peer holding a wrong answer adopts a right one shown by ``k`` peers
with probability ``1 - (1 - adopt_prob)^k`` (rescue); a peer holding a right answer is swayed to
the most common wrong answer shown by ``k`` peers with probability ``1 - (1 - swayed_prob)^k``
(harm). A reviewer says WRONG to a wrong proposal with ``catch_prob`` and to a right one with
``false_alarm_prob``; a proposer told WRONG re-attempts if it was wrong and is swayed off a right
answer with ``swayed_prob``. A verifier picks the right one of two differing candidates with
``adjudicate_prob``.

Determinism. Every draw is a pure function (``draws.uniforms``: counter-based, blake2b) of (seed,
agent name, seat, problem id, episode index, round, turn index, purpose), so outcomes do not depend on
batch composition, on the number of envs run in lockstep, or on the order of calls, and replaying
a branch reproduces its draws. Problem-level latents (``z_d``, ``z_q``) use only the problem id,
so they are shared by agents with different seeds.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

from councilzoo.agents.controllers.contract import Controller, default_mode, is_silent
from councilzoo.agents.draws import uniforms
from councilzoo.agents.prompts import last_turn, latest_turns
from councilzoo.envs.types import Action, Mode, Turn, TurnContext
from councilzoo.tasks import answers_equivalent, format_answer, plurality
from councilzoo.tasks.grading import LETTERS

__all__ = ["TokenModel", "SimulatedAgent", "code_for"]

DIFFICULTY_MEAN, DIFFICULTY_SD = 0.5, 0.15  # synthetic_problems' default level and per-item spread
NUM_PERTURBATIONS = 24  # size of the non-shared wrong-answer pool when distractors run out
_PHI = NormalDist()


def _normals(key: tuple, n: int) -> list[float]:
    """``n`` standard normals that are a pure function of ``key``."""
    return [_PHI.inv_cdf(u) for u in uniforms(key, n)]


@dataclass(frozen=True)
class TokenModel:
    """Token costs of a simulated turn, per role, proportional to what the agent reads.

    prompt tokens = ``prompt_base`` + question characters / ``chars_per_token`` + the completion
    tokens of every transcript turn the agent sees; completion tokens = ``completion[role]`` per
    sample (``default_completion`` for roles not listed).
    """

    prompt_base: int = 80
    chars_per_token: float = 4.0
    completion: Mapping[str, int] = field(
        default_factory=lambda: {
            "peer": 240, "proposer": 280, "reviewer": 160, "anchor": 240, "probe": 48,
            "verifier": 200, "member": 240, "controller": 4,
        }
    )
    default_completion: int = 200

    def cost(self, ctx: TurnContext, samples: int) -> tuple[int, int]:
        seen = sum(t.cost.completion_tokens for t in ctx.transcript)
        prompt = self.prompt_base + int(len(ctx.problem.question) / self.chars_per_token) + seen
        return prompt, samples * int(self.completion.get(ctx.role, self.default_completion))


def _wrong_pool(problem) -> tuple[str, tuple[str, ...]]:
    """(the shared first distractor, the pool of other wrong answers) of ``problem``."""
    return _wrong_pool_cached(problem.answer, problem.kind, len(problem.choices),
                              tuple(problem.metadata.get("distractors", ())))


@lru_cache(maxsize=16_384)
def _wrong_pool_cached(
    gold: str, kind: str, num_choices: int, distractors: tuple
) -> tuple[str, tuple[str, ...]]:
    if kind == "multiple_choice":
        letters = [x for x in LETTERS[: max(num_choices, 4)] if x != gold]
        distractors = tuple(str(d) for d in distractors) or tuple(letters)
        return distractors[0], tuple(x for x in letters if x != distractors[0]) or distractors
    try:
        value = Fraction(gold)
    except (ValueError, ZeroDivisionError):
        value = None
    offsets = [k * sign for k in range(1, NUM_PERTURBATIONS // 2 + 1) for sign in (1, -1)]
    if value is not None:
        perturbed = [str(value + k) for k in offsets]
    else:
        perturbed = [f"{gold} + {k}" if k > 0 else f"{gold} - {-k}" for k in offsets]
    distractors = tuple(str(d) for d in distractors)
    shared = distractors[0] if distractors else perturbed.pop(0)
    pool = tuple(dict.fromkeys(x for x in (*distractors[1:], *perturbed) if x != shared))
    return shared, pool


class SimulatedAgent:
    """A calibrated, seeded simulated LLM agent (see the module docstring for the model).

    ``samples`` sets how many samples a role draws per turn (anchor self-consistency, cohort
    member group size) when the env does not say (``TurnContext.extras["num_samples"]``).
    ``controller`` chooses modes; without one the agent speaks whenever speaking is legal.
    """

    def __init__(
        self,
        name: str,
        skill: float,
        *,
        seed: int = 0,
        correlation: float = 0.0,
        difficulty_weight: float = 0.3,
        resample_noise: float = 0.5,
        catch_prob: float = 0.7,
        false_alarm_prob: float = 0.1,
        swayed_prob: float = 0.2,
        adopt_prob: float = 0.5,
        adjudicate_prob: float = 0.8,
        samples: Mapping[str, int] | None = None,
        tokens: TokenModel | None = None,
        controller: Controller | None = None,
    ) -> None:
        probs = dict(
            skill=skill, correlation=correlation, difficulty_weight=difficulty_weight,
            resample_noise=resample_noise, catch_prob=catch_prob, false_alarm_prob=false_alarm_prob,
            swayed_prob=swayed_prob, adopt_prob=adopt_prob, adjudicate_prob=adjudicate_prob,
        )
        for key, value in probs.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"SimulatedAgent {name!r}: {key} must be a number in [0, 1], got {value!r}")
        self.name, self.seed = name, int(seed)
        self.skill, self.correlation = skill, correlation
        self.difficulty_weight, self.resample_noise = difficulty_weight, resample_noise
        self.catch_prob, self.false_alarm_prob = catch_prob, false_alarm_prob
        self.swayed_prob, self.adopt_prob, self.adjudicate_prob = swayed_prob, adopt_prob, adjudicate_prob
        self.samples = {"anchor": 5, "member": 4, **(samples or {})}
        self.tokens = tokens or TokenModel()
        self.controller = controller
        self._threshold = _PHI.inv_cdf(min(max(skill, 1e-12), 1 - 1e-12))

    def __repr__(self) -> str:
        return f"SimulatedAgent({self.name!r}, skill={self.skill}, correlation={self.correlation})"

    # ---- draws -------------------------------------------------------------------------------
    def _key(self, ctx: TurnContext, purpose: str) -> tuple:
        """Counter of one draw: agent, seat, problem, episode, round, turn, purpose (never the batch).

        The agent's stable view of a problem (``a_iq``) omits the seat: one model seated twice
        shares it, as one LLM sampled twice does.
        """
        episode, turn = ctx.extras.get("episode", 0), len(ctx.transcript)
        return (self.seed, self.name, ctx.agent, ctx.problem.id, episode, ctx.round, turn, purpose)

    @staticmethod
    def _problem_latents(problem) -> tuple[float, float]:
        """(z_d, z_q): the problem's difficulty latent and shared trap latent."""
        z_d, z_q = _normals(("problem", problem.id), 2)
        difficulty = problem.metadata.get("difficulty")
        if difficulty is not None:
            z_d = (float(difficulty) - DIFFICULTY_MEAN) / DIFFICULTY_SD
        return z_d, z_q

    def attempts(self, ctx: TurnContext, n: int = 1) -> list[str]:
        """``n`` independent attempts at ``ctx.problem`` (answers, not texts); see the model."""
        problem = ctx.problem
        if problem.answer is None:
            raise ValueError(
                f"SimulatedAgent {self.name!r} needs problem.answer to simulate problem {problem.id!r}; "
                "it is None (unlabeled)"
            )
        z_d, z_q = self._problem_latents(problem)
        (a,) = _normals((self.seed, self.name, problem.id, ctx.extras.get("episode", 0), "agent"), 1)
        w, c, s = self.difficulty_weight, self.correlation, self.resample_noise
        shared_part = math.sqrt(w) * z_d + math.sqrt(1 - w) * math.sqrt(c) * z_q
        own_scale = math.sqrt(1 - w) * math.sqrt(1 - c)
        key = self._key(ctx, "attempt")
        wrong = self._wrong_answers(key, problem, n)
        out = []
        for e, wrong_answer in zip(_normals(key, n), wrong, strict=True):
            z = shared_part + own_scale * (math.sqrt(1 - s) * a + math.sqrt(s) * e)
            out.append(problem.answer if z < self._threshold else wrong_answer)
        return out

    def _wrong_answers(self, key: tuple, problem, n: int) -> list[str]:
        """``n`` wrong answers: the shared distractor with probability ``correlation``, else the pool."""
        shared, pool = _wrong_pool(problem)
        u = uniforms((*key, "wrong"), 2 * n)
        if not pool:
            return [shared] * n
        pairs = zip(u[::2], u[1::2], strict=True)
        return [shared if share < self.correlation else pool[int(k * len(pool))] for share, k in pairs]

    def _chance(self, ctx: TurnContext, p: float) -> bool:
        return uniforms(self._key(ctx, "choice"), 1)[0] < p

    # ---- behaviour per role ------------------------------------------------------------------
    def _right(self, answer: str | None, problem) -> bool:
        return answer is not None and answers_equivalent(answer, problem.answer, problem.kind)

    def _answer_text(self, answer: str, ctx: TurnContext) -> str:
        if ctx.problem.kind == "code":
            answer = code_for(answer, ctx.problem)
        return f"[{self.name}] The answer is {format_answer(answer, ctx.problem.kind)}."

    def _peer(self, ctx: TurnContext, own: str | None, shown: list[str | None]) -> str:
        """Debate update: keep ``own``, adopt a right answer (rescue), or be swayed (harm)."""
        problem = ctx.problem
        if own is None:
            return self.attempts(ctx)[0]
        right_shown = [x for x in shown if self._right(x, problem)]
        wrong_shown = [x for x in shown if x is not None and not self._right(x, problem)]
        if not self._right(own, problem):
            if right_shown and self._chance(ctx, 1 - (1 - self.adopt_prob) ** len(right_shown)):
                return right_shown[0]
            return own
        if wrong_shown:
            top, _ = plurality(wrong_shown, problem.kind)
            k = sum(answers_equivalent(x, top, problem.kind) for x in wrong_shown)
            if self._chance(ctx, 1 - (1 - self.swayed_prob) ** k):
                return top
        return own

    def _review(self, ctx: TurnContext) -> str:
        proposal = last_turn(ctx.transcript, "proposer")
        if proposal is None or not self._right(proposal.answer, ctx.problem):
            wrong = self._chance(ctx, self.catch_prob)
        else:
            wrong = self._chance(ctx, self.false_alarm_prob)
        return "WRONG" if wrong else "RIGHT"

    def _propose(self, ctx: TurnContext) -> str:
        own = last_turn(ctx.transcript, "proposer", ctx.agent)
        if own is None or own.answer is None:
            return self.attempts(ctx)[0]
        objections = any(t.verdict == "WRONG" and t.round > own.round for t in ctx.transcript)
        if not objections:
            return own.answer
        if self._right(own.answer, ctx.problem):
            if self._chance(ctx, self.swayed_prob):
                return self._wrong_answers(self._key(ctx, "attempt"), ctx.problem, 1)[0]
            return own.answer
        return self.attempts(ctx)[0]

    def _verify(self, ctx: TurnContext) -> str:
        anchor = ctx.extras.get("anchor_answer", _answer_of(ctx.transcript, "anchor"))
        probe = ctx.extras.get("probe_answer", _answer_of(ctx.transcript, "probe"))
        candidates = [x for x in (anchor, probe) if x is not None]
        if not candidates:
            return self.attempts(ctx)[0]
        if len(candidates) == 1 or answers_equivalent(candidates[0], candidates[1], ctx.problem.kind):
            return candidates[0]
        right = [x for x in candidates if self._right(x, ctx.problem)]
        if len(right) == 1:
            other = candidates[1 - candidates.index(right[0])]
            return right[0] if self._chance(ctx, self.adjudicate_prob) else other
        return candidates[int(self._chance(ctx, 0.5))]

    def act_one(self, ctx: TurnContext, mode: Mode) -> Action:
        """The action for one turn once ``mode`` is chosen."""
        if is_silent(mode):
            return Action(mode)
        role = ctx.role
        n = 1
        if role == "reviewer":
            verdict = self._review(ctx)
            text = f"[{self.name}] I checked the proposal. Verdict: {verdict}"
            samples: tuple[str, ...] = ()
        else:
            if role == "proposer":
                answers = [self._propose(ctx)]
            elif role == "verifier":
                answers = [self._verify(ctx)]
            elif role in ("anchor", "member"):
                n = int(ctx.extras.get("num_samples", self.samples.get(role, 1)))
                answers = self.attempts(ctx, n)
            else:  # peer, probe and any answering role
                own = _answer_of(ctx.transcript, role, agent=ctx.agent)
                shown = [t.answer for t in latest_turns(ctx.transcript, ctx.agent)]
                answers = [self._peer(ctx, own, shown)]
            texts = tuple(self._answer_text(x, ctx) for x in answers)
            committed, _ = plurality(answers, ctx.problem.kind) if n > 1 else (answers[0], 1.0)
            text = texts[answers.index(committed)] if committed is not None else texts[0]
            samples = texts if n > 1 else ()
        prompt_tokens, completion_tokens = self.tokens.cost(ctx, n)
        return Action(
            mode, text=text, samples=samples, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, calls=n,
        )

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        modes = self.controller.choose(contexts) if self.controller else [default_mode(c) for c in contexts]
        return [self.act_one(ctx, Mode(mode)) for ctx, mode in zip(contexts, modes, strict=True)]


def code_for(answer: str, problem) -> str:
    """The program a simulated agent states for ``answer`` of a code problem, so the env grades it
    by running it, as for LLM output: the reference solution for the gold answer, a distractor
    program as itself, any other wrong answer a program returning a constant derived from it.
    Without a reference solution (e.g. LiveCodeBench) the gold answer is stated as is: a text
    with no program, graded wrong (docs/agents.md)."""
    if answer == problem.answer:
        return problem.metadata.get("solution") or answer
    if answer in problem.metadata.get("distractors", ()):
        return answer
    constant = hashlib.blake2b(answer.encode(), digest_size=6).hexdigest()
    entry = problem.metadata.get("entry_point")
    if not entry:
        return f"print({constant!r})"
    if "." in entry:
        owner, method = entry.rsplit(".", 1)
        return f"class {owner}:\n    def {method}(self, *args, **kwargs):\n        return {constant!r}\n"
    return f"def {entry}(*args, **kwargs):\n    return {constant!r}\n"


def _answer_of(transcript: tuple[Turn, ...], role: str, agent: str | None = None) -> str | None:
    turn = last_turn(transcript, role, agent)
    return None if turn is None else turn.answer
