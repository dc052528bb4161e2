"""Tiny random cohort members for CPU tests and demos (``tiny_family`` in a member config).

A random ~1M-parameter model states no answers, so votes, labels and rewards would all be empty:
``build_tiny_models`` builds each tiny member once (cached by its spec) and warms it up with a
few SFT steps on one of each problem's answer forms (``warmup_answers``: a random letter, or for
code one of the problem's programs). Test scaffolding, not a policy update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.config import config_to_dict
from councilzoo.learners.cohort import CohortConfig, member_prompt
from councilzoo.tasks import Problem, format_answer


def tiny_model_dir(cfg: CohortConfig, index: int) -> Path:
    root = Path(cfg.tiny_models_dir) if cfg.tiny_models_dir else Path(cfg.output_dir) / "models"
    member = cfg.members[index]
    return root / (member.name if member.tiny_warmup_steps else f"{member.name}-base")


def build_tiny_models(cfg: CohortConfig, problems: Sequence[Problem]) -> None:
    """Build (or reuse) every tiny_family member's model, warmed up to state answers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.testing import build_tiny_model

    for index, member in enumerate(cfg.members):
        if not member.tiny_family:
            continue
        root = tiny_model_dir(cfg, index).parent
        base = build_tiny_model(
            root / f"{member.name}-base", family=member.tiny_family, seed=cfg.seed + index
        )
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
        model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
        warm_up(model, tokenizer, problems[:64], member.tiny_warmup_steps, cfg.seed + index, view=member.view)
        model.save_pretrained(warm)
        tokenizer.save_pretrained(warm)
        marker.write_text(json.dumps(spec))  # written last: marks a complete build


def warm_up(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    steps: int,
    seed: int,
    *,
    view: int = 0,
    lr: float = 3e-3,
) -> None:
    """Teach a random tiny model to state one of each problem's answer forms (``warmup_answers``)
    after the member prompt of ``view``, so that votes, labels and rewards are non-trivial."""
    prompts = [member_prompt(p, view) for p in problems]
    teach_answer_format(model, tokenizer, prompts, [warmup_answers(p) for p in problems], steps, seed, lr=lr)


def warmup_answers(problem: Problem) -> list[str]:
    """What a warmed-up tiny model may answer: a random letter, or for code one of the problem's
    programs (its solution or a wrong one), each in the canonical answer format."""
    if problem.kind == "code":
        programs = [problem.metadata["solution"], *problem.metadata.get("distractors", ())]
        return [format_answer(program, "code") for program in programs]
    return [f"The answer is {format_answer(letter, 'multiple_choice')}." for letter in "ABCD"]


def teach_answer_format(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[dict[str, str]]],
    targets: Sequence[Sequence[str]],
    steps: int,
    seed: int,
    lr: float = 3e-3,
    batch_size: int = 16,
) -> None:
    """A few SFT steps on ``prompt -> target``, the target drawn uniformly from the prompt's own
    ``targets``: a random tiny model then states (random) answers, so labels, votes and rewards
    are non-trivial on CPU. Test scaffolding for random models, not a policy update."""
    import torch

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    device = next(model.parameters()).device
    model.train()
    for _ in range(steps):
        rows, masks = [], []
        for i in rng.integers(0, len(prompts), size=batch_size):
            prompt = tokenizer.apply_chat_template(prompts[i], add_generation_prompt=True, tokenize=False)
            answer = targets[i][rng.integers(len(targets[i]))] + tokenizer.eos_token
            p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
            rows.append(p_ids + a_ids)
            masks.append([0] * len(p_ids) + [1] * len(a_ids))
        width = max(map(len, rows))
        ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
        labels = torch.tensor([m + [0] * (width - len(m)) for m in masks])
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        ids, labels, attention = (t.to(device) for t in (ids, labels, attention))
        loss = model(input_ids=ids, attention_mask=attention, labels=ids.masked_fill(labels == 0, -100)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
