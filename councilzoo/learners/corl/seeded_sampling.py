"""Samples that do not depend on the world size: a ``rollout_func`` for TRL's ``GRPOTrainer``.

TRL samples a process's share of a generation round in one batch from that process's RNG, so a
member trained by 2 processes draws other completions than the same member trained by 1, and
the two runs diverge from the first step. ``SeededSampling`` draws each item's G completions
from a seed of (run seed, optimizer step, item's place in the round) alone, with the item's
prompt as the only input of its ``generate`` call. The samples, and so the update, are then the
same for any number of processes and any micro-batching of the same global batch; this is what
makes a data-parallel member checkably equivalent to a one-process member.

With the trainer on vLLM colocated (``use_vllm``), the items go to TRL's engine in one call with
one seed per item (``SamplingParams.seed``; on a CPU engine with chunked prefill, in waves that fit
one engine step, see ``VLLMGenerator``); with a vLLM server (``vllm_mode: server``), one request
per item with its seed, all in flight at once (``ServerGenerator``); with transformers, one
``generate`` call per item, the price of the invariance. vLLM's samples are reproducible across
runs and world sizes but are not transformers' samples (another sampler). Where TRL's
``RepeatSampler`` splits an item's G copies over two processes, each process draws the whole
group and keeps its own copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from councilzoo.agents.base import Sampling

__all__ = ["SeededSampling"]


def _group_seed(seed: int, step: int, group: int) -> int:
    """The sampling seed of one item's group in the round that starts at optimizer ``step`` (31
    bits: vLLM and OpenAI-compatible servers take 32-bit signed seeds)."""
    return int(np.random.SeedSequence([seed, step, group]).generate_state(1)[0]) >> 1


class SeededSampling:
    """TRL ``rollout_func``: G completions per item, seeded per item (see the module docstring).

    ``prompts`` are this process's rows of the round, G consecutive copies per item; process p
    holds rows p*L .. (p+1)*L-1 of the round (L = its number of rows), as accelerate shards
    TRL's sampler. Returns TRL's rollout fields, with vLLM's sampled-token log-probabilities for
    TRL's importance-sampling correction (None with transformers: TRL scores the old policy)."""

    def __init__(self, seed: int, num_generations: int, stop: tuple[str, ...] | list[str] = ()) -> None:
        self.seed, self.num_generations, self.stop = seed, num_generations, tuple(stop)

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        from councilzoo.learners.live_policy import policy_generator, vllm_mode

        g, args = self.num_generations, trainer.args
        start = trainer.accelerator.process_index * len(prompts)
        sampling = Sampling(
            max_new_tokens=args.max_completion_length, temperature=args.temperature, top_p=args.top_p,
            stop=self.stop,
        )
        by_group: dict[int, list[int]] = {}
        for i in range(len(prompts)):
            by_group.setdefault((start + i) // g, []).append(i)
        step = trainer.state.global_step
        with policy_generator(trainer) as generator:
            groups = generator.generate(
                [prompts[rows[0]] for rows in by_group.values()],
                n=g,
                sampling=sampling,
                seeds=[_group_seed(self.seed, step, group) for group in by_group],
            )
        vllm = vllm_mode(args) is not None
        out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [] if vllm else None}
        for rows, completions in zip(by_group.values(), groups, strict=True):
            for i in rows:
                c = completions[(start + i) % g]
                out["prompt_ids"].append(list(c.prompt_token_ids))
                out["completion_ids"].append(list(c.token_ids))
                if vllm:
                    out["logprobs"].append(list(c.logprobs))
        return out
