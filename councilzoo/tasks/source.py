"""One problem source for learners and evaluation, with one seed rule for train, dev and test.

``load_problems(name, split, seed=...)`` reads ``synthetic:<task>`` (generated: a Problem kind, or
``visual`` for items with images) or any dataset ``load_dataset`` knows (by name, or a local file
with ``path=``). Synthetic splits never overlap:
each split draws from its own seed, ``split_seed(seed, split)`` (test: ``seed``, dev:
``seed + 10_000``, train: ``seed + 20_000``, any other split a hash of its name), and problem ids
carry that seed. Named datasets use their own splits.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from councilzoo.tasks.datasets import load_dataset
from councilzoo.tasks.images import ImageError, load_image
from councilzoo.tasks.problem import Problem
from councilzoo.tasks.synthetic import TASKS, synthetic_problems

SPLIT_SEED_OFFSETS = {"test": 0, "dev": 10_000, "train": 20_000}
DEFAULT_SYNTHETIC_SIZE = 200


def split_seed(seed: int, split: str) -> int:
    """The seed synthetic problems of ``split`` are drawn from (disjoint across splits)."""
    if split in SPLIT_SEED_OFFSETS:
        return seed + SPLIT_SEED_OFFSETS[split]
    return seed + 30_000 + int.from_bytes(hashlib.sha256(split.encode()).digest()[:2], "little")


def load_problems(
    name: str,
    split: str = "test",
    *,
    seed: int = 0,
    path: str | None = None,
    limit: int | None = None,
    size: int = DEFAULT_SYNTHETIC_SIZE,
    difficulty: float = 0.5,
) -> list[Problem]:
    """Problems of ``split`` (at most ``limit``; synthetic sets have ``limit or size`` items).

    Raises ``ValueError`` for an unknown synthetic kind, a missing local file or an empty set,
    ``DatasetUnavailableError`` for a dataset that cannot be read, and ``ImageError`` for a
    problem image that is missing, unreadable or too large, before any work starts.
    """
    if name.startswith("synthetic:"):
        kind = name.split(":", 1)[1]
        if kind not in TASKS:
            raise ValueError(f"dataset {name!r}: kind must be one of {TASKS}")
        seeded = split_seed(seed, split)
        problems = synthetic_problems(kind, limit or size, seed=seeded, difficulty=difficulty)
    else:
        if path is not None and not Path(path).is_file():
            raise ValueError(f"dataset file {str(path)!r} (--path) does not exist")
        problems = load_dataset(name, split=split, path=path, limit=limit, seed=seed)
    if not problems:
        raise ValueError(f"dataset {name!r} (split {split!r}) gave no problems")
    check_images(problems)
    return problems


def check_images(problems: list[Problem]) -> None:
    """Open every problem image once, so a bad one stops the run before work, naming the problem
    (a long run would otherwise fail at the batch that meets it)."""
    for problem in problems:
        for k, image in enumerate(problem.images):
            try:
                load_image(image)
            except ImageError as err:
                raise ImageError(f"problem {problem.id!r}, image {k + 1}: {err}") from err
