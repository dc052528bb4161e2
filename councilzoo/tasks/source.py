"""One problem source for learners and evaluation, with one seed rule for train, dev and test.

``load_problems(name, split, seed=...)`` reads ``synthetic:<task>`` (generated: a Problem kind, or
``visual`` for items with images) or any dataset ``load_dataset`` knows (by name, or a local file
with ``path=``). Synthetic splits never overlap:
each split draws from its own seed, ``split_seed(seed, split)`` (test: ``seed``, dev:
``seed + 10_000``, train: ``seed + 20_000``), and problem ids carry that seed; any other split
name is refused, so a typo never draws another problem set. Named datasets use their own splits.
A synthetic set is generated whole, in memory, before the first episode (about 1 ms and 1-3 KB
per problem), so one set holds at most ``MAX_SYNTHETIC_PROBLEMS``.
"""

from __future__ import annotations

from councilzoo.config import check_file
from councilzoo.tasks.datasets import load_dataset
from councilzoo.tasks.images import ImageError, load_image
from councilzoo.tasks.problem import Problem
from councilzoo.tasks.synthetic import TASKS, synthetic_problems

__all__ = ["SPLIT_SEED_OFFSETS", "MAX_SYNTHETIC_PROBLEMS", "split_seed", "load_problems"]

SPLIT_SEED_OFFSETS = {"test": 0, "dev": 10_000, "train": 20_000}
DEFAULT_SYNTHETIC_SIZE = 200
MAX_SYNTHETIC_PROBLEMS = 100_000


def split_seed(seed: int, split: str) -> int:
    """The seed synthetic problems of ``split`` are drawn from (disjoint across splits)."""
    if split not in SPLIT_SEED_OFFSETS:
        raise ValueError(f"unknown split {split!r}; synthetic sets have {list(SPLIT_SEED_OFFSETS)}")
    return seed + SPLIT_SEED_OFFSETS[split]


def load_problems(
    name: str,
    split: str = "test",
    *,
    seed: int = 0,
    path: str | None = None,
    limit: int | None = None,
    size: int = DEFAULT_SYNTHETIC_SIZE,
    difficulty: float = 0.5,
    require_answers: bool = False,
) -> list[Problem]:
    """Problems of ``split`` (at most ``limit``; synthetic sets have ``limit or size`` items).

    Raises ``ValueError`` for an unknown synthetic kind or split, a ``limit`` or ``size`` below 1 (or
    a synthetic set above ``MAX_SYNTHETIC_PROBLEMS``), a missing local file or an empty set,
    ``DatasetUnavailableError`` for a dataset that cannot be read, and ``ImageError`` for a
    problem image that is missing, unreadable or too large, before any work starts; with
    ``require_answers``, also for problems without an answer (all of them, with file and line).
    """
    if limit is not None and limit < 1:
        raise ValueError(f"dataset {name!r}: limit must be >= 1 (None for all), got {limit}")
    if name.startswith("synthetic:"):
        kind = name.split(":", 1)[1]
        if kind not in TASKS:
            raise ValueError(f"dataset {name!r}: kind must be one of {TASKS}")
        try:
            seeded = split_seed(seed, split)
        except ValueError as err:
            raise ValueError(f"dataset {name!r}: {err}") from None
        n = limit if limit is not None else size
        if not 1 <= n <= MAX_SYNTHETIC_PROBLEMS:
            raise ValueError(
                f"dataset {name!r}: {n:,} problems asked; a synthetic set is generated in memory before "
                f"the first episode and holds 1 to {MAX_SYNTHETIC_PROBLEMS:,} (run more seeds for more)"
            )
        problems = synthetic_problems(kind, n, seed=seeded, difficulty=difficulty, split=split)
    else:
        if path is not None:
            check_file(path, "dataset file (--path)")
        problems = load_dataset(
            name, split=split, path=path, limit=limit, seed=seed, require_answers=require_answers
        )
    if not problems:
        raise ValueError(f"dataset {name!r} (split {split!r}) gave no problems")
    _check_images(problems)
    return problems


def _check_images(problems: list[Problem]) -> None:
    """Open every problem image once, so a bad one stops the run before work, naming the problem
    (a long run would otherwise fail at the batch that meets it)."""
    for problem in problems:
        for k, image in enumerate(problem.images):
            try:
                load_image(image)
            except ImageError as err:
                raise ImageError(f"problem {problem.id!r}, image {k + 1}: {err}") from err
