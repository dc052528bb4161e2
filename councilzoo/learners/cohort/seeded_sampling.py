"""Samples that do not depend on the world size: a ``rollout_func`` for TRL's ``GRPOTrainer``.

TRL samples a process's share of a generation round in one batch from that process's RNG, so a
member trained by 2 processes draws other completions than the same member trained by 1, and
the two runs diverge from the first step. ``SeededSampling`` draws each item's G completions
from a seed of (run seed, optimizer step, item's place in the round) alone, with the item's
prompt as the only input of its ``generate`` call. The samples, and so the update, are then the
same for any number of processes and any micro-batching of the same global batch; this is what
makes a data-parallel member checkably equivalent to a one-process member.

The price is one ``generate`` call per item instead of one per process (transformers only: the
trainer's vLLM engines draw their own samples). Where TRL's ``RepeatSampler`` splits an item's G
copies over two processes, each process draws the whole group and keeps its own copies.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from councilzoo.agents.base import Sampling


def group_seed(seed: int, step: int, group: int) -> int:
    """The sampling seed of one item's group in the round that starts at optimizer ``step``."""
    return int(np.random.SeedSequence([seed, step, group]).generate_state(1)[0])


class SeededSampling:
    """TRL ``rollout_func``: G completions per item, seeded per item (see the module docstring).

    ``prompts`` are this process's rows of the round, G consecutive copies per item; process p
    holds rows p*L .. (p+1)*L-1 of the round (L = its number of rows), as accelerate shards
    TRL's sampler. Returns TRL's rollout fields; ``logprobs`` is None, so TRL scores the old
    policy itself."""

    def __init__(self, seed: int, num_generations: int) -> None:
        self.seed, self.num_generations = seed, num_generations

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        from trl.models import unwrap_model_for_generation

        from councilzoo.agents.generators.transformers_backend import TransformersGenerator

        g, args = self.num_generations, trainer.args
        start = trainer.accelerator.process_index * len(prompts)
        sampling = Sampling(
            max_new_tokens=args.max_completion_length, temperature=args.temperature, top_p=args.top_p
        )
        by_group: dict[int, list[int]] = {}
        for i in range(len(prompts)):
            by_group.setdefault((start + i) // g, []).append(i)
        out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": None}
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            generator = TransformersGenerator(model, tokenizer=trainer.processing_class)
            for group, rows in by_group.items():
                seeded = replace(sampling, seed=group_seed(self.seed, trainer.state.global_step, group))
                [completions] = generator.generate([prompts[rows[0]]], n=g, sampling=seeded)
                for i in rows:
                    c = completions[(start + i) % g]
                    out["prompt_ids"].append(list(c.prompt_token_ids))
                    out["completion_ids"].append(list(c.token_ids))
        return out
