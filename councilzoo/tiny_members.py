"""Tiny cohort members for CPU tests and demos (``tiny_family`` in a member config): a tiny
random model (``councilzoo.tiny_models``) per member, warmed up to state answers.

A random ~1M-parameter model states no answers, so votes, labels and rewards would all be empty:
``build_tiny_models`` builds each tiny member and warms it up with a few SFT steps on one of each
problem's answer forms (a random letter; for a numeric problem with distractors its answer or
one of them; for code one of the problem's programs). Test scaffolding, not a policy update.

Each model is cached by its settings (``member_spec``: everything that determines its weights)
in a folder named by their hash (``councilzoo.config.spec_dir``), by default under the cache folder
(``councilzoo.config.cache_home``), so a second run with another output folder starts training
at once. A build writes a temporary folder and renames it into place, under a file lock: two
processes building the same model do not collide, and a killed build leaves no half model.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.agents.prompts import member_prompt
from councilzoo.config import cached_build, config_to_dict, spec_dir
from councilzoo.progress import Progress, phase
from councilzoo.tasks import Problem, format_answer
from councilzoo.tiny_models import FAMILIES, tiny_builder

__all__ = ["member_spec", "build_tiny_models", "warm_up", "teach_answer_format"]

WARMUP_LR = 3e-3
WARMUP_BATCH = 16
WARMUP_PROBLEMS = 64  # the first items of the training data the warm-up teaches on


def member_spec(cfg: Any, index: int) -> dict[str, Any]:
    """What determines the weights of member ``index``'s tiny model (``cfg``: a ``CoRLConfig``):
    family and seed, and with a warm-up its steps, the member's prompt view, the training data and
    the SFT settings; the torch and transformers versions too (their initialisers draw the weights)."""
    member = cfg.members[index]
    spec: dict[str, Any] = {
        "family": member.tiny_family,
        "seed": cfg.seed + index,
        "torch": version("torch"),
        "transformers": version("transformers"),
    }
    if member.tiny_warmup_steps:
        spec["warmup"] = {
            "steps": member.tiny_warmup_steps,
            "view": member.view,
            "data": config_to_dict(cfg.data),
            "problems": WARMUP_PROBLEMS,
            "lr": WARMUP_LR,
            "batch_size": WARMUP_BATCH,
        }
    return spec


def build_tiny_models(cfg: Any, problems: Sequence[Problem]) -> None:
    """Build (or load from the cache) every tiny_family member's model of ``cfg`` (a
    ``CoRLConfig``; each at ``cfg.tiny_model_dir(index)``), warmed up to state answers."""
    groups = cfg.base_groups()
    for index, member in enumerate(cfg.members):
        if not member.tiny_family or (member.shared_base and groups[member.shared_base][0] != index):
            continue  # a shared_base group's base is its first member's model
        spec = member_spec(cfg, index)
        target = cfg.tiny_model_dir(index)
        if target.is_dir():
            phase(f"tiny model {member.name}: cached at {target}")
            continue
        base_spec = {k: v for k, v in spec.items() if k != "warmup"}
        base = spec_dir(target.parent, base_spec)
        phase(f"building tiny model {member.name} ({member.tiny_family}) in {target}")
        cached_build(base, base_spec, lambda out, s=base_spec: _build_base(out, s))
        if "warmup" in spec:
            cached_build(
                target, spec, lambda out, s=spec, b=base, n=member.name: _warm_copy(
                    out, b, s, problems[:WARMUP_PROBLEMS], n
                )
            )


def _build_base(out: Path, spec: dict[str, Any]) -> None:
    tiny_builder(spec["family"])(out, family=spec["family"], seed=spec["seed"])


def _warm_copy(out: Path, base: Path, spec: dict[str, Any], problems: Sequence[Problem], name: str) -> None:
    """The base model of ``spec``, warmed up on ``problems`` and saved to ``out``."""
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForImageTextToText,
        AutoProcessor,
        AutoTokenizer,
    )

    text = spec["family"] in FAMILIES
    model = (AutoModelForCausalLM if text else AutoModelForImageTextToText).from_pretrained(base)
    processing = (AutoTokenizer if text else AutoProcessor).from_pretrained(base)
    warmup, seed = spec["warmup"], spec["seed"]
    phase(f"warming up tiny model {name}: {warmup['steps']} SFT steps (cached afterwards)")
    progress = Progress(f"warm-up {name}", warmup["steps"])
    warm_up(model, processing, problems, warmup["steps"], seed, view=warmup["view"], progress=progress)
    progress.close()
    model.save_pretrained(out)
    processing.save_pretrained(out)


def warm_up(
    model: Any,
    processing: Any,
    problems: Sequence[Problem],
    steps: int,
    seed: int,
    *,
    view: int = 0,
    lr: float = WARMUP_LR,
    progress: Progress | None = None,
) -> None:
    """Teach a random tiny model to state one of each problem's answer forms
    after the member prompt of ``view``, so that votes, labels and rewards are non-trivial.
    ``processing`` is the tokenizer, or a vision-language model's processor (it then sees the
    problems' images, as in training). ``progress`` shows each step's loss."""
    vlm = hasattr(processing, "image_processor")
    prompts = [member_prompt(p, view, with_images=vlm) for p in problems]
    targets = [_warmup_answers(p) for p in problems]
    teach_answer_format(model, processing, prompts, targets, steps, seed, lr=lr, progress=progress)


def _warmup_answers(problem: Problem) -> list[str]:
    """What a warmed-up tiny model may answer, each in the canonical answer format: for code one
    of the problem's programs (its solution or a wrong one), for a numeric problem with
    distractors its answer or one of them, else a random letter."""
    if problem.kind == "code":
        programs = [problem.metadata["solution"], *problem.metadata.get("distractors", ())]
        return [format_answer(program, "code") for program in programs]
    if problem.kind == "numeric" and problem.answer is not None and problem.metadata.get("distractors"):
        values = [problem.answer, *problem.metadata["distractors"][:3]]
        return [f"The answer is {format_answer(str(v), 'numeric')}." for v in values]
    return [f"The answer is {format_answer(letter, 'multiple_choice')}." for letter in "ABCD"]


def teach_answer_format(
    model: Any,
    processing: Any,
    prompts: Sequence[list[dict]],
    targets: Sequence[Sequence[str]],
    steps: int,
    seed: int,
    lr: float = WARMUP_LR,
    batch_size: int = WARMUP_BATCH,
    progress: Progress | None = None,
) -> None:
    """A few SFT steps on ``prompt -> target``, the target drawn uniformly from the prompt's own
    ``targets``: a random tiny model then states (random) answers, so labels, votes and rewards
    are non-trivial on CPU. ``processing``: a tokenizer, or a processor for prompts with images.
    Test scaffolding for random models, not a policy update."""
    import torch

    from councilzoo.agents.generators.images import message_images

    tokenizer = getattr(processing, "tokenizer", processing)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    device = next(model.parameters()).device
    model.train()
    for step in range(1, steps + 1):
        chosen = rng.integers(0, len(prompts), size=batch_size)
        picks = [(i, targets[i][rng.integers(len(targets[i]))]) for i in chosen]
        texts = [
            processing.apply_chat_template(prompts[i], add_generation_prompt=True, tokenize=False)
            for i, _ in picks
        ]
        answers = [target + tokenizer.eos_token for _, target in picks]
        answer_ids = [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
        if processing is tokenizer:
            prompt_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
            rows = [p + a for p, a in zip(prompt_ids, answer_ids, strict=True)]
            inputs = _right_padded(rows, tokenizer.pad_token_id)
        else:  # the processor expands each image placeholder into the image's tokens
            images = [message_images(prompts[i]) for i, _ in picks]
            full = [t + a for t, a in zip(texts, answers, strict=True)]
            inputs = processing(
                text=full, images=images, padding=True, padding_side="right", return_tensors="pt"
            )
        answer_lengths = [len(a) for a in answer_ids]
        labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
        for row, n in enumerate(answer_lengths):  # train on the answer tokens only
            end = int(inputs["attention_mask"][row].sum())
            labels[row, : end - n] = -100
        inputs = {k: v.to(device) for k, v in inputs.items()}
        loss = model(**inputs, labels=labels.to(device)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if progress is not None:
            progress.update(step, {"loss": loss.item()})


def _right_padded(rows: list[list[int]], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(map(len, rows))
    return {
        "input_ids": torch.tensor([r + [pad_id] * (width - len(r)) for r in rows]),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
    }

