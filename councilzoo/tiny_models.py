"""Tiny random cohort members for CPU tests and demos (``tiny_family`` in a member config).

A random ~1M-parameter model states no answers, so votes, labels and rewards would all be empty:
``build_tiny_models`` builds each tiny member once (cached by its spec) and warms it up with a
few SFT steps on one of each problem's answer forms (``warmup_answers``: a random letter, or for
code one of the problem's programs). Test scaffolding, not a policy update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from councilzoo.agents.prompts import member_prompt
from councilzoo.config import config_to_dict
from councilzoo.tasks import Problem, format_answer


def build_tiny_models(cfg: Any, problems: Sequence[Problem]) -> None:
    """Build (or reuse) every tiny_family member's model of ``cfg`` (a ``CohortConfig``; each at
    ``cfg.tiny_model_dir(index)``), warmed up to state answers."""
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForImageTextToText,
        AutoProcessor,
        AutoTokenizer,
    )

    from councilzoo.agents.generators.common import tiny_builder
    from councilzoo.testing import FAMILIES

    for index, member in enumerate(cfg.members):
        if not member.tiny_family:
            continue
        root = cfg.tiny_model_dir(index).parent
        vlm = member.tiny_family not in FAMILIES
        build = tiny_builder(member.tiny_family)
        base = build(root / f"{member.name}-base", family=member.tiny_family, seed=cfg.seed + index)
        if not member.tiny_warmup_steps:
            continue
        spec = {
            "steps": member.tiny_warmup_steps,
            "seed": cfg.seed + index,
            "view": member.view,
            "data": config_to_dict(cfg.data),
            "family": member.tiny_family,
        }
        warm = root / member.name
        marker = warm / "councilzoo_warmup.json"
        if marker.is_file() and json.loads(marker.read_text()) == spec:
            continue
        if vlm:
            model = AutoModelForImageTextToText.from_pretrained(base)
            processing = AutoProcessor.from_pretrained(base)
        else:
            model = AutoModelForCausalLM.from_pretrained(base)
            processing = AutoTokenizer.from_pretrained(base)
        seed, steps = cfg.seed + index, member.tiny_warmup_steps
        warm_up(model, processing, problems[:64], steps, seed, view=member.view)
        model.save_pretrained(warm)
        processing.save_pretrained(warm)
        marker.write_text(json.dumps(spec))  # written last: marks a complete build


def warm_up(
    model: Any,
    processing: Any,
    problems: Sequence[Problem],
    steps: int,
    seed: int,
    *,
    view: int = 0,
    lr: float = 3e-3,
) -> None:
    """Teach a random tiny model to state one of each problem's answer forms (``warmup_answers``)
    after the member prompt of ``view``, so that votes, labels and rewards are non-trivial.
    ``processing`` is the tokenizer, or a vision-language model's processor (it then sees the
    problems' images, as in training)."""
    vlm = hasattr(processing, "image_processor")
    prompts = [member_prompt(p, view, with_images=vlm) for p in problems]
    targets = [warmup_answers(p) for p in problems]
    teach_answer_format(model, processing, prompts, targets, steps, seed, lr=lr)


def warmup_answers(problem: Problem) -> list[str]:
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
    lr: float = 3e-3,
    batch_size: int = 16,
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
    for _ in range(steps):
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


def _right_padded(rows: list[list[int]], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(map(len, rows))
    return {
        "input_ids": torch.tensor([r + [pad_id] * (width - len(r)) for r in rows]),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
    }

