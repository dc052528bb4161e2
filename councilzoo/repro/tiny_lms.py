"""Tiny language models the project pre-trains itself, for the ``councilzoo repro`` claims.

The three papers' claims are about *trained* models of some (imperfect) skill, which random tiny
models are not. ``tiny_lm(name)`` returns the folder of a small causal LM (Qwen3 or Llama
architecture, ``councilzoo.testing.build_tiny_model``) that was supervised-fine-tuned on two-digit
addition until its held-out greedy accuracy entered a target band, well below the ceiling, so
that label-free RL, collaboration and review have room to help or hurt.

The task (``addition_problems``): "What is 23 + 45?" with operands 0-49, kind ``numeric``, answer
format ``The answer is \\boxed{68}.``; three surface forms per item (``paraphrase(p, 1)`` is
"Add 23 and 45.", view 2 "Compute 23 plus 45."), ids ``add-23-45`` stable across runs. The
project's ``synthetic_problems`` are multi-step word problems that a 150k-parameter model cannot
partly learn in a minute, hence this generator. The 2,500 operand pairs are split once, by a
fixed permutation, into ``sft`` (70%: the models' training data), ``dev`` (10%: the stopping
rule), ``rl`` (10%: unlabeled items for label-free training) and ``test`` (10%: reported
accuracy), so no reported number is measured on data a model or a stopping rule has seen.

Solvers are trained on every view and on the prompts of every solver role (``member``,
``anchor``, ``peer``, ``probe``, ``proposer``, rendered by ``councilzoo.agents.prompts``), so the
learners' and councils' own prompts work unchanged. A ``task="reviewer"`` model sees a proposer's
answer (half right, half a plausible slip) and learns to end with ``Verdict: RIGHT`` / ``WRONG``
(``reviewer_target``); at these sizes such judges stayed at chance, so none is registered.

SFT: prompt tokens masked out of the loss, AdamW, one fixed batch order per ``data_seed``; every
``eval_every`` steps the greedy accuracy on ``dev`` is measured and training stops at the first
value at or above the band's lower edge (or at ``max_steps``; ``in_band`` records whether the
final value lies in the band). ``tiny_lm.json`` beside the weights records the spec,
the steps taken, the dev curve and the ``test`` accuracy. Models are cached in
``$COUNCILZOO_CACHE/tiny_lms`` (default ``~/.cache/councilzoo/tiny_lms``), one folder per name and
spec hash, written to a temporary folder and renamed into place (a half-written build is never
visible; two concurrent builders both succeed and one result is kept).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.tasks import Problem, answers_equivalent, extract_answer, extract_verdict

# Per task: bump when its data, prompts, target, tokenizer or the SFT loop change (invalidates the cache).
FORMAT_VERSION = {"solver": 2, "reviewer": 3}
MAX_OPERAND = 49
SPLITS = {"sft": 0.7, "dev": 0.1, "rl": 0.1, "test": 0.1}
QUESTION_FORMS = ("What is {a} + {b}?", "Add {a} and {b}.", "Compute {a} plus {b}.")
SOLVER_ROLES = ("member", "anchor", "peer", "probe", "proposer")
ANSWER_TEMPLATE = "The answer is \\boxed{{{answer}}}."
VERDICT_TEMPLATE = "Verdict: {verdict}"
VERDICTS = ("RIGHT", "WRONG")
MAX_NEW_TOKENS = 16
QUICK_STEPS = 60  # SFT steps of the --quick variants (see quick_spec)
META_FILE = "tiny_lm.json"
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
    from councilzoo.envs.core import Mode, TurnContext

    ctx = TurnContext(0, role, role, 0, problem, (), (Mode.ANSWER,), np.zeros(3, dtype=np.float32))
    return render_messages(ctx)


def reviewer_messages(problem: Problem, proposed: str) -> list[dict[str, str]]:
    """The reviewer's prompt on a proposer turn whose text states ``proposed`` as its answer."""
    from councilzoo.agents.prompts import render_messages
    from councilzoo.envs.core import Mode, Turn, TurnContext

    text = ANSWER_TEMPLATE.format(answer=proposed)
    proposal = Turn("proposer", "proposer", 0, Mode.ANSWER, text=text, answer=proposed)
    features = np.zeros(3, dtype=np.float32)
    ctx = TurnContext(0, "reviewer", "reviewer", 0, problem, (proposal,), (Mode.ANSWER,), features)
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
    role per batch (so rows share a prompt length and padding is small), for the reviewer a
    proposal that is right half of the time and otherwise one of the item's distractors
    (``reviewer_target``)."""
    from councilzoo.tasks import paraphrase

    role = SOLVER_ROLES[int(rng.integers(len(SOLVER_ROLES)))]
    batch = []
    for i in rng.integers(len(items), size=size):
        problem = items[i]
        view = paraphrase(problem, int(rng.integers(len(QUESTION_FORMS))))
        if task == "solver":
            batch.append((solver_messages(view, role), ANSWER_TEMPLATE.format(answer=problem.answer)))
            continue
        right = rng.random() < 0.5
        wrong = problem.metadata["distractors"]
        proposed = problem.answer if right else wrong[int(rng.integers(len(wrong)))]
        batch.append((reviewer_messages(view, proposed), reviewer_target(problem.answer, proposed)))
    return batch


# --- specs and the registry -----------------------------------------------------------------


@dataclass(frozen=True)
class TinyLMSpec:
    """How one tiny LM is built; every field enters the cache key."""

    family: str  # "qwen3" | "llama" (councilzoo.testing.FAMILIES)
    hidden_size: int
    num_layers: int
    task: str = "solver"  # "solver" | "reviewer"
    band: tuple[float, float] = (0.35, 0.55)  # target held-out (dev) greedy accuracy
    max_steps: int = 1500
    learning_rate: float = 3e-3
    batch_size: int = 64
    eval_every: int = 50
    eval_items: int = 200
    data_seed: int = 0  # SFT batch order
    init_seed: int = 0  # weights and tokenizer
    num_heads: int = 4
    head_dim: int = 16
    init_from: str | None = None  # start from this REGISTRY model (weights and tokenizer), not at random
    quick: bool = False  # a quick variant (quick_spec): its init_from is the parent's quick variant

    def __post_init__(self) -> None:
        if self.task not in ("solver", "reviewer"):
            raise ValueError(f"task must be 'solver' or 'reviewer', got {self.task!r}")
        lo, hi = self.band
        if not 0.0 <= lo < hi <= 1.0:
            raise ValueError(f"band must be (lo, hi) with 0 <= lo < hi <= 1, got {self.band!r}")

    def parent(self) -> TinyLMSpec | None:
        """The spec this one continues from (``init_from``), checked to share its architecture."""
        if self.init_from is None:
            return None
        if self.init_from not in REGISTRY:
            raise ValueError(f"init_from must name a tiny LM in {sorted(REGISTRY)}, got {self.init_from!r}")
        parent = quick_spec(REGISTRY[self.init_from]) if self.quick else REGISTRY[self.init_from]
        arch = ("family", "hidden_size", "num_layers", "num_heads", "head_dim")
        if any(getattr(self, f) != getattr(parent, f) for f in arch):
            raise ValueError(f"a model initialised from {self.init_from!r} must share its {arch}")
        return parent

    def key(self) -> str:
        """Hash of every field, the format version and the parent's key (a changed parent rebuilds)."""
        parent = self.parent()
        blob = json.dumps({**dataclasses.asdict(self), "format": FORMAT_VERSION[self.task],
                           "parent": parent.key() if parent else None}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


# Two Co-RL families differ in architecture, depth and SFT data order; COMED's anchor and peers
# differ in skill (the strong solver is the Llama family trained on). A ``task="reviewer"`` spec
# SFTs a RIGHT/WRONG judge (``reviewer_target``); none is registered: at these sizes judges stayed
# at chance (docs/reproductions.md), so TRACER's reviewer re-solves (repro.tracer.ResolvingReviewer).
REGISTRY: dict[str, TinyLMSpec] = {
    "solver-qwen-a": TinyLMSpec("qwen3", 64, 2, max_steps=2000, data_seed=1, init_seed=1),
    "solver-llama-b": TinyLMSpec("llama", 64, 3, max_steps=2500, data_seed=2, init_seed=2),
    "solver-weak": TinyLMSpec("qwen3", 64, 2, band=(0.15, 0.3), max_steps=2000, data_seed=3, init_seed=3),
    "solver-strong": TinyLMSpec("llama", 64, 3, band=(0.6, 0.8), max_steps=2000, data_seed=4,
                                init_from="solver-llama-b"),
    # Co-RL "in its regime" (repro.corl.REGIMES): Qwen members continued into the strong band, so
    # that a member's sampled majority is usually right; with solver-strong, three lineages.
    "solver-qwen-a-hi": TinyLMSpec("qwen3", 64, 2, band=(0.6, 0.8), max_steps=1500, data_seed=5,
                                   init_from="solver-qwen-a"),
    "solver-qwen-c": TinyLMSpec("qwen3", 64, 2, band=(0.6, 0.8), max_steps=1500, data_seed=6,
                                init_from="solver-weak"),
}


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """``cache_dir``, else ``$COUNCILZOO_CACHE/tiny_lms``, else ``~/.cache/councilzoo/tiny_lms``."""
    if cache_dir is not None:
        return Path(cache_dir)
    from councilzoo.config import cache_home

    return cache_home() / "tiny_lms"


def quick_spec(spec: TinyLMSpec) -> TinyLMSpec:
    """``spec`` cut to ``QUICK_STEPS`` SFT steps and one small evaluation: a model that builds in
    seconds for ``--quick`` runs and CI. It is under-trained (its record says ``in_band: false``), so
    quick reports check the pipeline, not the claim."""
    return dataclasses.replace(spec, max_steps=QUICK_STEPS, eval_every=QUICK_STEPS, eval_items=40, quick=True)


def tiny_lm(name: str, *, quick: bool = False, cache_dir: str | Path | None = None) -> Path:
    """The folder of the SFT'd tiny model ``name`` (see ``REGISTRY``), built on first use.

    ``quick=True`` gives the under-trained quick variant (``quick_spec``), cached separately.
    """
    if name not in REGISTRY:
        raise ValueError(f"unknown tiny LM {name!r}; expected one of {sorted(REGISTRY)}")
    if quick:
        return build(f"{name}-quick", quick_spec(REGISTRY[name]), cache_dir=cache_dir)
    return build(name, REGISTRY[name], cache_dir=cache_dir)


def tiny_lm_info(path: str | Path) -> dict[str, Any]:
    """The build record stored beside a tiny LM (spec, steps, dev curve, test accuracy, seconds)."""
    return json.loads((Path(path) / META_FILE).read_text())


def build(name: str, spec: TinyLMSpec, *, cache_dir: str | Path | None = None) -> Path:
    """Build ``spec`` into the cache (or return the cached folder); atomic: temp folder + rename."""
    root = cache_root(cache_dir)
    final = root / f"{name}-{spec.key()}"
    if (final / META_FILE).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    log.warning("building tiny LM %r into %s (first use; minutes on a CPU)", name, final)
    try:
        info = _train(tmp, spec, cache_dir)
        (tmp / META_FILE).write_text(json.dumps({"name": name, **info}, indent=1))
        try:
            os.rename(tmp, final)
        except OSError:  # a concurrent builder renamed first: keep its complete copy
            if not (final / META_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


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
    """Share of ``problems`` a generator solves (solver) or judges right (reviewer), greedy.

    A reviewer is shown, for each item, the gold answer on even positions and its first
    distractor on odd ones; its verdict is right when it says RIGHT exactly for the gold answer.
    """
    from councilzoo.agents.base import Sampling

    greedy = Sampling(max_new_tokens=MAX_NEW_TOKENS, temperature=0.0)
    if task == "solver":
        prompts = [solver_messages(p, role) for p in problems]
        texts = [g[0].text for g in generator.generate(prompts, n=1, sampling=greedy)]
        hits = [
            answers_equivalent(extract_answer(t, p.kind), p.answer, p.kind)
            for t, p in zip(texts, problems, strict=True)
        ]
    else:
        proposals = [p.answer if i % 2 == 0 else p.metadata["distractors"][0] for i, p in enumerate(problems)]
        prompts = [reviewer_messages(p, a) for p, a in zip(problems, proposals, strict=True)]
        texts = [g[0].text for g in generator.generate(prompts, n=1, sampling=greedy)]
        hits = [extract_verdict(t) == ("RIGHT" if i % 2 == 0 else "WRONG") for i, t in enumerate(texts)]
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


def _start(folder: Path, spec: TinyLMSpec, cache_dir: str | Path | None):
    """The model and tokenizer SFT starts from: a copy of the ``init_from`` tiny LM, else a random
    ``build_tiny_model`` with the task's compact tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.testing import build_tiny_model

    parent = spec.parent()
    if parent is not None:
        source = build(spec.init_from + ("-quick" if spec.quick else ""), parent, cache_dir=cache_dir)
        tokenizer = AutoTokenizer.from_pretrained(source)
        return AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32), tokenizer
    build_tiny_model(folder, family=spec.family, hidden_size=spec.hidden_size, num_layers=spec.num_layers,
                     num_heads=spec.num_heads, head_dim=spec.head_dim, seed=spec.init_seed)
    (folder / "councilzoo_tiny.json").unlink()  # the weights below are no longer the random ones
    tokenizer = compact_tokenizer(AutoTokenizer.from_pretrained(folder))
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    return model, tokenizer


def _train(folder: Path, spec: TinyLMSpec, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """SFT the starting model (``_start``) until its dev accuracy is in the band; save it in ``folder``."""
    import torch

    from councilzoo.agents.generators.transformers_backend import TransformersGenerator

    start = time.perf_counter()
    model, tokenizer = _start(folder, spec, cache_dir)
    tokenizer.save_pretrained(folder)
    generator = TransformersGenerator(model, tokenizer=tokenizer, batch_size=256)
    items = addition_problems("sft")
    dev = addition_problems("dev", spec.eval_items)
    rng = np.random.default_rng(spec.data_seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, weight_decay=0.0)
    curve: list[tuple[int, float]] = []
    step = 0
    with torch_threads():
        while step < spec.max_steps:
            model.train()
            ids, mask, labels = _batch(tokenizer, sft_examples(items, rng, spec.task, spec.batch_size))
            loss = _answer_loss(model, ids, mask, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            if step % spec.eval_every == 0:
                curve.append((step, greedy_accuracy(generator, dev, spec.task)))
                log.info("tiny LM %s: step %d, loss %.3f, dev accuracy %.3f", folder.name, step, loss.item(),
                         curve[-1][1])
                if curve[-1][1] >= spec.band[0]:
                    break
        test = greedy_accuracy(generator, addition_problems("test"), spec.task)
    model.save_pretrained(folder, safe_serialization=True)
    dev_acc = curve[-1][1] if curve else float("nan")
    return {
        "spec": dataclasses.asdict(spec),
        "key": spec.key(),
        "format": FORMAT_VERSION[spec.task],
        "steps": step,
        "dev_curve": curve,
        "dev_accuracy": dev_acc,
        "in_band": bool(spec.band[0] <= dev_acc <= spec.band[1]),
        "test_accuracy": test,
        "parameters": sum(p.numel() for p in model.parameters()),
        "build_seconds": round(time.perf_counter() - start, 1),
    }
