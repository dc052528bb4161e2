"""Tiny language models the project pre-trains itself, for the ``councilzoo repro`` claims.

The three papers' claims are about *trained* models of some (imperfect) skill, which random tiny
models are not. ``tiny_lm(name)`` returns the folder of a small causal LM (Qwen3 or Llama
architecture, ``councilzoo.tiny_models.build_tiny_model``) supervised-fine-tuned on two-digit addition
for a fixed number of steps, chosen so that it lands in the accuracy regime its experiment needs
(``TinyLMSpec.regime``), well below the ceiling, so that label-free RL, collaboration and review
have room to help or hurt.

One set for every machine: the weights are shipped with the package (``councilzoo/data/tiny_lms``,
float16, a few hundred kB each) and checked against the sha256 recorded in ``SHA256``, so every
machine runs the same models and ``councilzoo repro`` gives the same numbers everywhere. Building
them anew is one command, ``python -m councilzoo.repro.tiny_lms --out DIR [NAME ...]``:
deterministic (fixed seeds, one torch thread, deterministic algorithms, a fixed step count, no
stopping rule), so on one machine it reproduces its own bytes; another CPU may round differently.

The task (``addition_problems``): "What is 23 + 45?" with operands 0-49, kind ``numeric``, answer
format ``The answer is \\boxed{68}.``; three surface forms per item (``paraphrase(p, 1)`` is
"Add 23 and 45.", view 2 "Compute 23 plus 45."), ids ``add-23-45`` stable across runs. The
project's ``synthetic_problems`` are multi-step word problems that a 150k-parameter model cannot
partly learn in a minute, hence this generator. The 2,500 operand pairs are split once, by a
fixed permutation, into ``sft`` (70%: the models' training data), ``dev`` (10%: fitting councils'
gates), ``rl`` (10%: unlabeled items for label-free training) and ``test`` (10%: reported
accuracy), so no reported number is measured on data a model has seen. Skills: an item needs a
*carry* when its ones digits sum to 10 or more (``needs_carry``); a spec's ``skills`` restricts
its SFT items to one slice, which makes specialists whose errors complement each other.

Solvers are trained on every view and on the prompts of every solver role (``member``,
``anchor``, ``peer``, ``probe``, ``proposer``, rendered by ``councilzoo.agents.prompts``), so the
learners' and councils' own prompts work unchanged. A ``task="verifier"`` model sees the project's
verifier prompt with two candidate answers, the right one and a plausible slip in random order
(``verifier_messages``), and learns to state the right one: picking between two given numbers
needs less than producing one. A ``task="reviewer"`` model sees one proposer answer and learns to
end with ``Verdict: RIGHT`` / ``WRONG`` (``reviewer_target``); at these sizes such judges stayed
at chance, so none is registered.

SFT: prompt tokens masked out of the loss, AdamW, one fixed batch order per ``data_seed``, exactly
``steps`` steps; every ``eval_every`` steps the greedy accuracy on ``dev`` is recorded (it changes
nothing). The weights are then rounded to float16, and the rounded model is what is measured and
saved. ``tiny_lm.json`` beside the weights records the spec, the dev curve and the ``test``
accuracy, overall and per skill slice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.tasks import Problem, answers_equivalent, extract_answer, extract_verdict

__all__ = [
    "TASKS", "MAX_OPERAND", "SPLITS", "QUESTION_FORMS", "SOLVER_ROLES", "VERDICTS", "MAX_NEW_TOKENS",
    "DATA_DIR", "needs_carry", "SKILLS", "addition_problems", "solver_messages", "verifier_messages",
    "reviewer_target", "TinyLMSpec", "REGISTRY", "SHA256", "digest", "tiny_lm", "checked", "tiny_lm_info",
    "build", "torch_threads", "on_one_thread", "deterministic", "finish", "main",
]

TASKS = ("solver", "verifier", "reviewer")
MAX_OPERAND = 49
SPLITS = {"sft": 0.7, "dev": 0.1, "rl": 0.1, "test": 0.1}
QUESTION_FORMS = ("What is {a} + {b}?", "Add {a} and {b}.", "Compute {a} plus {b}.")
SOLVER_ROLES = ("member", "anchor", "peer", "probe", "proposer")
ANSWER_TEMPLATE = "The answer is \\boxed{{{answer}}}."
VERDICT_TEMPLATE = "Verdict: {verdict}"
VERDICTS = ("RIGHT", "WRONG")
MAX_NEW_TOKENS = 16
META_FILE = "tiny_lm.json"
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "tiny_lms"  # the shipped models
log = logging.getLogger(__name__)


# --- the task -------------------------------------------------------------------------------


def _split_pairs() -> dict[str, list[tuple[int, int]]]:
    """Every (a, b) pair, assigned to one split by a fixed permutation (independent of any seed)."""
    pairs = [(a, b) for a in range(MAX_OPERAND + 1) for b in range(MAX_OPERAND + 1)]
    order = np.random.default_rng(20240907).permutation(len(pairs))
    out, start = {}, 0
    for name, share in SPLITS.items():
        stop = len(pairs) if name == "test" else start + round(share * len(pairs))
        out[name] = [pairs[i] for i in order[start:stop]]
        start = stop
    return out


def needs_carry(problem: Problem) -> bool:
    """Whether the item's ones digits sum to 10 or more (the skill that splits ``SKILLS``)."""
    a, b = (int(x) for x in problem.id.split("-")[1:])
    return a % 10 + b % 10 >= 10


SKILLS = {"all": lambda p: True, "carry": needs_carry, "no_carry": lambda p: not needs_carry(p)}


def _distractors(a: int, b: int) -> tuple[str, ...]:
    """Plausible slips: off by one, a dropped or doubled carry, off by two; never the answer."""
    s = a + b
    wrong = [s + 1, s - 1, s + 10, s - 10, s + 2, s - 2]
    return tuple(str(w) for w in dict.fromkeys(w for w in wrong if w >= 0 and w != s))


def addition_problems(split: str, n: int | None = None, *, seed: int = 0) -> list[Problem]:
    """Items of ``split`` ("sft", "dev", "rl", "test") in a ``seed``-shuffled order; the first ``n``.

    Each item's metadata holds ``paraphrases`` (views 1 and 2) and ``distractors``; the id
    ``add-AA-BB`` names the operands, so it is the same in every run and every order.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    pairs = _split_pairs()[split]
    if n is not None and not 0 <= n <= len(pairs):
        raise ValueError(f"n must be in [0, {len(pairs)}] for split {split!r}, got {n!r}")
    order = np.random.default_rng([seed, list(SPLITS).index(split)]).permutation(len(pairs))
    problems = []
    for i in order[:n]:
        a, b = pairs[i]
        forms = [f.format(a=a, b=b) for f in QUESTION_FORMS]
        problems.append(
            Problem(
                id=f"add-{a:02d}-{b:02d}",
                question=forms[0],
                answer=str(a + b),
                kind="numeric",
                source="tiny-addition",
                metadata={"paraphrases": tuple(forms[1:]), "distractors": _distractors(a, b)},
            )
        )
    return problems


# --- prompts and targets --------------------------------------------------------------------


def solver_messages(problem: Problem, role: str = "member") -> list[dict[str, str]]:
    """The chat prompt a council or learner gives a solver of ``role`` on its first turn."""
    from councilzoo.agents.prompts import render_messages
    from councilzoo.envs.types import Mode, TurnContext

    ctx = TurnContext(0, role, role, 0, problem, (), (Mode.ANSWER,), np.zeros(3, dtype=np.float32))
    return render_messages(ctx)


def reviewer_messages(problem: Problem, proposed: str) -> list[dict[str, str]]:
    """The reviewer's prompt on a proposer turn whose text states ``proposed`` as its answer."""
    from councilzoo.agents.prompts import render_messages
    from councilzoo.envs.types import Mode, Turn, TurnContext

    text = ANSWER_TEMPLATE.format(answer=proposed)
    proposal = Turn("proposer", "proposer", 0, Mode.ANSWER, text=text, answer=proposed)
    features = np.zeros(3, dtype=np.float32)
    ctx = TurnContext(0, "reviewer", "reviewer", 0, problem, (proposal,), (Mode.ANSWER,), features)
    return render_messages(ctx)


def verifier_messages(problem: Problem, first: str | None, second: str | None) -> list[dict[str, str]]:
    """The verifier's prompt in COMED's VERIFY: the question and two candidates (the anchor's and
    the probe's answers, in the project's verifier format), each written as a solver writes it."""
    from councilzoo.agents.prompts import render_messages
    from councilzoo.envs.types import Mode, Turn, TurnContext

    turns = tuple(
        Turn(agent, role, 0, Mode.ANSWER, text=ANSWER_TEMPLATE.format(answer=answer), answer=answer)
        for agent, role, answer in (("anchor", "anchor", first), ("peer_0", "probe", second))
    )
    features = np.zeros(3, dtype=np.float32)
    ctx = TurnContext(0, "verifier", "verifier", 0, problem, turns, (Mode.ANSWER,), features)
    return render_messages(ctx)


def reviewer_target(answer: str, proposed: str) -> str:
    """What the reviewer learns to say: the sum it gets, the proposed one, then whether they match.

    Judging by re-solving, with both numbers written just before the verdict so the comparison is
    between tokens at fixed distances. Measured: this judge (SFT'd from ``solver-llama-b``) stayed
    at 46.5-52% dev judge accuracy for 1,250 steps, as did a bare verdict (2,500 steps from scratch)
    and the reviewer's own sum before the verdict (750 steps); with the verdict token's loss
    weighted 10x it stayed at ln 2 for 200 steps.
    """
    verdict = VERDICT_TEMPLATE.format(verdict="RIGHT" if proposed == answer else "WRONG")
    return f"{answer} vs {proposed}. {verdict}"


def sft_examples(
    items: Sequence[Problem], rng: np.random.Generator, task: str, size: int
) -> list[tuple[list[dict[str, str]], str]]:
    """One SFT batch of (prompt messages, target): random items and views; for solvers one random
    role per batch (so rows share a prompt length and padding is small); for the verifier the right
    answer and one of the item's distractors, in random order, with the right one as target; for
    the reviewer a proposal that is right half of the time and otherwise one of the item's
    distractors (``reviewer_target``)."""
    from councilzoo.tasks import paraphrase

    role = SOLVER_ROLES[int(rng.integers(len(SOLVER_ROLES)))]
    batch = []
    for i in rng.integers(len(items), size=size):
        problem = items[i]
        view = paraphrase(problem, int(rng.integers(len(QUESTION_FORMS))))
        right = ANSWER_TEMPLATE.format(answer=problem.answer)
        if task == "solver":
            batch.append((solver_messages(view, role), right))
            continue
        wrong = problem.metadata["distractors"]
        slip = wrong[int(rng.integers(len(wrong)))]
        if task == "verifier":
            pair = (problem.answer, slip) if rng.random() < 0.5 else (slip, problem.answer)
            batch.append((verifier_messages(view, *pair), right))
        else:
            proposed = problem.answer if rng.random() < 0.5 else slip
            batch.append((reviewer_messages(view, proposed), reviewer_target(problem.answer, proposed)))
    return batch


# --- specs and the registry -----------------------------------------------------------------


@dataclass(frozen=True)
class TinyLMSpec:
    """How one tiny LM is built: exactly ``steps`` SFT steps from ``init_from`` (or a random start)."""

    family: str  # "qwen3" | "llama" (councilzoo.tiny_models.FAMILIES)
    hidden_size: int
    num_layers: int
    steps: int  # fixed SFT steps, chosen so the model lands in ``regime``
    task: str = "solver"  # "solver" | "verifier" | "reviewer"
    skills: str = "all"  # SFT items: "all" | "carry" | "no_carry" (SKILLS)
    regime: tuple[float, float] = (0.35, 0.55)  # greedy test accuracy on its skills (verifier: picking)
    learning_rate: float = 3e-3
    batch_size: int = 64
    eval_every: int = 100  # a dev-accuracy record only; training never stops early
    eval_items: int = 200
    data_seed: int = 0  # SFT batch order
    init_seed: int = 0  # weights and tokenizer
    num_heads: int = 4
    head_dim: int = 16
    init_from: str | None = None  # start from this REGISTRY model (weights and tokenizer), not at random

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.skills not in SKILLS:
            raise ValueError(f"skills must be one of {tuple(SKILLS)}, got {self.skills!r}")
        if self.steps < 1:
            raise ValueError(f"steps must be a positive int, got {self.steps!r}")
        lo, hi = self.regime
        if not 0.0 <= lo < hi <= 1.0:
            raise ValueError(f"regime must be (lo, hi) with 0 <= lo < hi <= 1, got {self.regime!r}")

    def parent(self) -> TinyLMSpec | None:
        """The spec this one continues from (``init_from``), checked to share its architecture."""
        if self.init_from is None:
            return None
        if self.init_from not in REGISTRY:
            raise ValueError(f"init_from must name a tiny LM in {sorted(REGISTRY)}, got {self.init_from!r}")
        parent = REGISTRY[self.init_from]
        arch = ("family", "hidden_size", "num_layers", "num_heads", "head_dim")
        if any(getattr(self, f) != getattr(parent, f) for f in arch):
            raise ValueError(f"a model initialised from {self.init_from!r} must share its {arch}")
        return parent


# Two Co-RL families differ in architecture, depth and SFT data order; the ``-hi``/``-c`` members
# and ``solver-strong`` continue them into the strong regime (Co-RL in its regime: a member's
# sampled majority is usually right). COMED's first council seats ``solver-strong`` as anchor over
# the mid and weak solvers; its complementary council (repro.comed) seats two specialists, one
# continued from ``solver-qwen-a`` on no-carry sums only, one on carries only, and a verifier
# continued from ``solver-qwen-a-hi`` on picking the right one of two candidates. Step counts:
# docs/reproductions.md.
REGISTRY: dict[str, TinyLMSpec] = {
    "solver-qwen-a": TinyLMSpec("qwen3", 64, 2, steps=650, data_seed=1, init_seed=1),
    "solver-llama-b": TinyLMSpec("llama", 64, 3, steps=1500, data_seed=2, init_seed=2),
    "solver-weak": TinyLMSpec("qwen3", 64, 2, steps=400, regime=(0.15, 0.3), data_seed=3, init_seed=3),
    "solver-strong": TinyLMSpec("llama", 64, 3, steps=150, regime=(0.6, 0.8), data_seed=4,
                                init_from="solver-llama-b"),
    "solver-qwen-a-hi": TinyLMSpec("qwen3", 64, 2, steps=300, regime=(0.6, 0.8), data_seed=5,
                                   init_from="solver-qwen-a"),
    "solver-qwen-c": TinyLMSpec("qwen3", 64, 2, steps=150, regime=(0.6, 0.8), data_seed=6,
                                init_from="solver-weak"),
    "solver-nocarry": TinyLMSpec("qwen3", 64, 2, steps=100, skills="no_carry", regime=(0.75, 0.95),
                                 data_seed=7, init_from="solver-qwen-a"),
    "solver-carry": TinyLMSpec("qwen3", 64, 2, steps=50, skills="carry", regime=(0.6, 0.9), data_seed=8,
                               init_from="solver-qwen-a"),
    "verifier-strong": TinyLMSpec("qwen3", 64, 2, steps=250, task="verifier", regime=(0.8, 1.0), data_seed=9,
                                  init_from="solver-qwen-a-hi"),
}

# sha256 (``digest``) of each shipped model folder, as ``python -m councilzoo.repro.tiny_lms`` built it
SHA256: dict[str, str] = {
    "solver-qwen-a": "be86c35d0b6668caa9016dd3a30ee298999034b4240cdcbcee1ec081802b7fd2",
    "solver-llama-b": "3096227bc081e2ccb31a15c3f93796b06cf003bf9e3977c06ccc4dbd0b6625f8",
    "solver-weak": "aa7bc92fb2c0f98e6f81de999c128b86f27593728b7c47e29c5f3c13414db1b3",
    "solver-strong": "0d9d8358e1d0f2f90545169f42649be7b7aabb966c6dbab6efbe7b99d3984063",
    "solver-qwen-a-hi": "ceffab2e880914769426fe84652c8d54f709605f66251ab26efa88f691a5b622",
    "solver-qwen-c": "7a2d0419934406e7f19e491a120f77e6286d3b014f36ac2b6b383b9efbeaea12",
    "solver-nocarry": "39f9dec3e16886197ae9044e07d65afdc213b2d394699df092d3fa584e06ecc5",
    "solver-carry": "de57dd9427fd85361470056fac72b455e9ef6b40b5fe45e8a09a6712042d3ff3",
    "verifier-strong": "fa649ab21671efe31ab07dcd91d469b7cb09bd7975ee0c919d5a42cee312fad6",
}


def digest(folder: Path) -> str:
    """sha256 over every file of a model folder (names and bytes, in name order)."""
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@functools.cache
def tiny_lm(name: str) -> Path:
    """The folder of the shipped tiny LM ``name`` (see ``REGISTRY``), checked against ``SHA256``."""
    if name not in REGISTRY:
        raise ValueError(f"unknown tiny LM {name!r}; expected one of {sorted(REGISTRY)}")
    folder = DATA_DIR / name
    if not (folder / META_FILE).is_file():
        raise FileNotFoundError(f"tiny LM {name!r} is not shipped at {folder}; rebuild it with "
                                f"`python -m councilzoo.repro.tiny_lms --out {DATA_DIR} {name}`")
    return checked(folder, SHA256.get(name), "tiny_lms.SHA256")


def checked(folder: Path, recorded: str | None, where: str) -> Path:
    """``folder`` if its digest (``digest``) is ``recorded``; else one line saying what to do."""
    got = digest(folder)
    if got != recorded:
        raise ValueError(f"shipped model {folder} has sha256 {got}, but {recorded} is recorded in {where}: "
                         "restore the shipped files, or record a rebuilt model's digest")
    return folder


def tiny_lm_info(path: str | Path) -> dict[str, Any]:
    """The build record stored beside a tiny LM (spec, dev curve, test accuracy)."""
    return json.loads((Path(path) / META_FILE).read_text())


def build(name: str, out: str | Path) -> Path:
    """Build ``REGISTRY[name]`` into ``out/name`` (its ``init_from`` parent first, into ``out`` too,
    unless already there); replaces what was there. Deterministic: same machine, same bytes."""
    if name not in REGISTRY:
        raise ValueError(f"unknown tiny LM {name!r}; expected one of {sorted(REGISTRY)}")
    spec, out = REGISTRY[name], Path(out)
    parent = out / spec.init_from if spec.parent() is not None else None
    if parent is not None and not (parent / META_FILE).is_file():
        build(spec.init_from, out)
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.perf_counter()
    info = _train(folder, spec, parent)
    (folder / META_FILE).write_text(json.dumps({"name": name, **info}, indent=1) + "\n")
    log.warning("built tiny LM %r in %.0f s: test accuracy %.3f, sha256 %s", name,
                time.perf_counter() - start, info["test_accuracy"], digest(folder))
    return folder


# --- SFT ------------------------------------------------------------------------------------


@contextlib.contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run torch on ``n`` threads (default 1), then restore the previous setting.

    One thread is the fastest setting for these models: their matrices are too small for
    intra-op parallelism to pay off, and on a busy machine every OpenMP barrier waits for a
    descheduled thread (measured: several times slower with 2 threads on a loaded 2-core box).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def on_one_thread(call: tuple[Callable, tuple]) -> Any:
    """``fn(*args)`` for ``(fn, args)`` under ``torch_threads()``: a process-pool task (each worker
    of ``repro.map_in_processes`` runs one seeded cell at a time on one torch thread)."""
    fn, args = call
    with torch_threads():
        return fn(*args)


def _batch(tokenizer, examples: Sequence[tuple[list[dict[str, str]], str]]):
    """Right-padded input ids, attention mask and labels (-100 on prompt and padding)."""
    import torch

    rows, labels = [], []
    for messages, target in examples:
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        t_ids = tokenizer(target + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        rows.append(p_ids + t_ids)
        labels.append([-100] * len(p_ids) + t_ids)
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    lab = torch.tensor([r + [-100] * (width - len(r)) for r in labels])
    return ids, mask, lab


def _answer_loss(model, ids, mask, labels):
    """Mean next-token cross-entropy over the target tokens; the output layer runs only at the
    positions that predict one (a sixth of the sequence), which halves the cost of a step."""
    import torch.nn.functional as F

    hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state[:, :-1]
    targets = labels[:, 1:]
    keep = targets != -100
    logits = model.get_output_embeddings()(hidden[keep])
    return F.cross_entropy(logits.float(), targets[keep])


def greedy_accuracy(
    generator, problems: Sequence[Problem], task: str = "solver", role: str = "member"
) -> float:
    """Share of ``problems`` a generator solves (solver), picks right (verifier) or judges right
    (reviewer), greedy.

    The verifier is shown the gold answer and the item's first distractor, gold first on even
    positions and second on odd ones. A reviewer is shown the gold answer on even positions and
    the first distractor on odd ones; its verdict is right when it says RIGHT exactly for gold.
    """
    from councilzoo.agents.base import Sampling

    greedy = Sampling(max_new_tokens=MAX_NEW_TOKENS, temperature=0.0)
    if task == "reviewer":
        proposals = [p.answer if i % 2 == 0 else p.metadata["distractors"][0] for i, p in enumerate(problems)]
        prompts = [reviewer_messages(p, a) for p, a in zip(problems, proposals, strict=True)]
        texts = [g[0].text for g in generator.generate(prompts, n=1, sampling=greedy)]
        hits = [extract_verdict(t) == ("RIGHT" if i % 2 == 0 else "WRONG") for i, t in enumerate(texts)]
        return float(np.mean(hits)) if hits else float("nan")
    if task == "verifier":
        pairs = [(p.answer, p.metadata["distractors"][0]) for p in problems]
        prompts = [verifier_messages(p, *(pair if i % 2 == 0 else pair[::-1]))
                   for i, (p, pair) in enumerate(zip(problems, pairs, strict=True))]
    else:
        prompts = [solver_messages(p, role) for p in problems]
    texts = [g[0].text for g in generator.generate(prompts, n=1, sampling=greedy)]
    hits = [answers_equivalent(extract_answer(t, p.kind), p.answer, p.kind)
            for t, p in zip(texts, problems, strict=True)]
    return float(np.mean(hits)) if hits else float("nan")


def compact_tokenizer(tokenizer, vocab_size: int = 512):
    """``tokenizer`` retrained on the task's prompts with every digit removed.

    The test tokenizer spells most prompt words byte by byte (a 170-token prompt); retrained on the
    rendered prompts of every role and view, words become single tokens (about 45 tokens a
    prompt), which makes SFT and RL several times cheaper. With no digit in the corpus no merge
    involves one, so numbers stay digit by digit, as in the original. Special tokens, padding
    side and chat template are kept.
    """
    from councilzoo.agents.prompts import INSTRUCTIONS, ROLE_PROMPTS
    from councilzoo.tasks import paraphrase

    texts = [*ROLE_PROMPTS.values(), *INSTRUCTIONS.values()]
    for problem in addition_problems("sft", 20):
        for v in range(len(QUESTION_FORMS)):
            view = paraphrase(problem, v)
            pairs = [(solver_messages(view, r), ANSWER_TEMPLATE) for r in SOLVER_ROLES]
            said = ANSWER_TEMPLATE.format(answer=problem.answer)  # fixed, whatever reviewer_target says
            pairs += [(reviewer_messages(view, problem.answer), f"{said} Verdict: {w}") for w in VERDICTS]
            for messages, target in pairs:
                prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
                texts.append(prompt + target)
    new = tokenizer.train_new_from_iterator([re.sub(r"\d", "", t) for t in texts], vocab_size=vocab_size)
    new.chat_template = tokenizer.chat_template
    return new


def _start(folder: Path, spec: TinyLMSpec, parent: Path | None):
    """The model and tokenizer SFT starts from: a copy of the built ``parent`` folder, else a
    random ``build_tiny_model`` with the task's compact tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.tiny_models import build_tiny_model

    if parent is not None:
        tokenizer = AutoTokenizer.from_pretrained(parent)
        return AutoModelForCausalLM.from_pretrained(parent, dtype=torch.float32), tokenizer
    build_tiny_model(folder, family=spec.family, hidden_size=spec.hidden_size, num_layers=spec.num_layers,
                     num_heads=spec.num_heads, head_dim=spec.head_dim, seed=spec.init_seed)
    (folder / "councilzoo_tiny.json").unlink()  # the weights below are no longer the random ones
    tokenizer = compact_tokenizer(AutoTokenizer.from_pretrained(folder))
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    return model, tokenizer


@contextlib.contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """One torch thread, deterministic kernels and ``seed`` in torch's global RNG, restored after."""
    import torch

    before = torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    try:
        with torch_threads(1):
            yield
    finally:
        torch.use_deterministic_algorithms(before)


def save_half(model, tokenizer, folder: Path) -> None:
    """Save ``model`` with float16 weights (half the bytes shipped) and a config that still loads it
    as float32 (these models run on CPUs, where half-precision matmuls are slow)."""
    import torch

    model.to(torch.float16).save_pretrained(folder, safe_serialization=True)
    model.to(torch.float32)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(folder)


def dev_items(spec: TinyLMSpec) -> list[Problem]:
    """The ``dev`` items a spec's curve is measured on: the first ``eval_items``, of its skill slice."""
    return [p for p in addition_problems("dev", spec.eval_items) if SKILLS[spec.skills](p)]


def sft_steps(model, tokenizer, spec: TinyLMSpec) -> Iterator[int]:
    """Train ``model`` in place, one SFT step per iteration; yields the step number after each."""
    import torch

    items = [p for p in addition_problems("sft") if SKILLS[spec.skills](p)]
    rng = np.random.default_rng(spec.data_seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, weight_decay=0.0)
    for step in range(1, spec.steps + 1):
        model.train()
        ids, mask, labels = _batch(tokenizer, sft_examples(items, rng, spec.task, spec.batch_size))
        loss = _answer_loss(model, ids, mask, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        yield step


def finish(folder: Path, spec: TinyLMSpec, model, tokenizer, curve: list[tuple[int, float]]) -> dict:
    """Round the trained ``model`` to float16, measure it, save it in ``folder``; the build record."""
    import torch

    from councilzoo.agents.generators.transformers_backend import TransformersGenerator

    generator = TransformersGenerator(model, tokenizer=tokenizer, batch_size=256)
    with torch.no_grad():  # the shipped weights are float16: measure those
        for param in model.parameters():
            param.copy_(param.half().float())
    test = addition_problems("test")
    by_skill = {k: greedy_accuracy(generator, [p for p in test if SKILLS[k](p)], spec.task) for k in SKILLS}
    dev_acc = greedy_accuracy(generator, dev_items(spec), spec.task)
    save_half(model, tokenizer, folder)
    return {
        "spec": dataclasses.asdict(spec),
        "steps": spec.steps,
        "dev_curve": curve,
        "dev_accuracy": dev_acc,
        "test_accuracy": by_skill["all"],
        "test_accuracy_by_skill": {k: v for k, v in by_skill.items() if k != "all"},
        "solving_accuracy": greedy_accuracy(generator, test) if spec.task == "verifier" else by_skill["all"],
        "in_regime": bool(spec.regime[0] <= by_skill[spec.skills] <= spec.regime[1]),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def _train(folder: Path, spec: TinyLMSpec, parent: Path | None) -> dict[str, Any]:
    """SFT the starting model (``_start``) for ``spec.steps`` steps, recording dev accuracy every
    ``eval_every`` steps, then ``finish`` it into ``folder``."""
    from councilzoo.agents.generators.transformers_backend import TransformersGenerator

    with deterministic(spec.init_seed):
        model, tokenizer = _start(folder, spec, parent)
        generator = TransformersGenerator(model, tokenizer=tokenizer, batch_size=256)
        dev = dev_items(spec)
        curve = [(step, greedy_accuracy(generator, dev, spec.task))
                 for step in sft_steps(model, tokenizer, spec) if step % spec.eval_every == 0]
        return finish(folder, spec, model, tokenizer, curve)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m councilzoo.repro.tiny_lms --out DIR [NAME ...]``: build the named tiny LMs (default
    all) into ``DIR`` and say, per model, whether its bytes equal the shipped ones."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m councilzoo.repro.tiny_lms", description=main.__doc__)
    parser.add_argument("--out", required=True, help=f"folder to build into ({DATA_DIR}: the shipped set)")
    parser.add_argument("names", nargs="*", help=f"tiny LMs to build (default: all of {list(REGISTRY)})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        raise SystemExit(f"unknown tiny LM(s) {unknown}; expected names from {list(REGISTRY)}")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    for name in args.names or REGISTRY:
        folder = build(name, args.out)
        got = digest(folder)
        same = "equals" if got == SHA256.get(name) else "differs from"
        print(f"{name}: sha256 {got} ({same} the shipped one)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
