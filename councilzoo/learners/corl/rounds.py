"""Co-RL's schedule: which items each generation round meets, and the prompt rows TRL walks.

Every member lays out the same items in the same rounds (one seeded permutation per epoch), so a
label exchanged between members is keyed by (round, problem key), never by position. The rows are
the dataset of each member's ``GRPOTrainer`` (``learners/engine.py``), shuffling off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from councilzoo.tasks import Problem

__all__ = ["step_items", "problem_rows", "split_images"]


def step_items(problems: Sequence[Problem], seed: int, round_index: int, per_round: int) -> list[Problem]:
    """Items of one round: consecutive slices of a per-epoch seeded permutation (the one seed rule
    of every learner's data order; a resumed run meets the same items)."""
    n = len(problems)
    out = []
    for pos in range(round_index * per_round, (round_index + 1) * per_round):
        epoch, offset = divmod(pos, n)
        order = np.random.default_rng([seed, epoch]).permutation(n)
        out.append(problems[order[offset]])
    return out


def _item_keys(problems: Sequence[Problem]) -> list[str]:
    """Exchange keys within one round: the problem id, with ``~k`` on its k-th repeat."""
    seen: dict[str, int] = {}
    keys = []
    for p in problems:
        k = seen.get(p.id, 0)
        seen[p.id] = k + 1
        keys.append(p.id if k == 0 else f"{p.id}~{k}")
    return keys


def problem_rows(
    problems: Sequence[Problem], seed: int, rounds: int, per_round: int, render: Any
) -> list[dict[str, Any]]:
    """Dataset rows for ``rounds`` rounds: ``prompt`` (chat messages from ``render(problem)``),
    ``problem_id``, ``problem_key`` and ``round``. Gold answers are never a column.

    A prompt with image parts is stored in TRL's vision-language form: text-only messages plus an
    ``images`` column, which GRPOTrainer puts back ahead of the first user message (where
    ``render`` had them)."""
    rows = []
    for r in range(rounds):
        items = step_items(problems, seed, r, per_round)
        for problem, key in zip(items, _item_keys(items), strict=True):
            prompt, images = split_images(render(problem))
            row = {"prompt": prompt, "problem_id": problem.id, "problem_key": key, "round": r}
            rows.append({**row, "images": images} if images else row)
    return rows


def split_images(messages: list[dict] | str) -> tuple[list[dict] | str, list]:
    """``messages`` with every content as text, and their images opened, in order (a plain
    string prompt has none)."""
    from councilzoo.agents.generators.images import message_images, text_messages

    if isinstance(messages, str):
        return messages, []
    return text_messages(messages), message_images(messages)
