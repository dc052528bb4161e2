"""What a ``Sampling`` asks of every backend beyond its model's own sampler: distinct per-prompt
seeds, and completions cut at the first stop string.
"""

from __future__ import annotations

import numpy as np

__all__ = ["first_stop", "prompt_seeds"]

_SEED_BOUND = 2**31 - 1  # vLLM and OpenAI-compatible servers take 32-bit seeds


def first_stop(text: str, stop: tuple[str, ...]) -> int | None:
    """Index of the earliest stop string in ``text``, or None."""
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else None


def prompt_seeds(seed: int, count: int) -> list[int]:
    """``count`` distinct per-prompt seeds derived from one seed, so prompts sharing a call do not
    share random draws (a single seed per request would correlate their samples)."""
    return [int(s) for s in np.random.default_rng(seed).integers(0, _SEED_BOUND, size=count)]
