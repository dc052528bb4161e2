"""The problems a learner trains on: one ``DataConfig`` for every learner, and ``load_items``.

Co-RL's ``data:`` is a ``DataConfig``; TRACER's adds the held-out sets it evaluates at the end
(``tracer.config.TracerDataConfig``). TRACER's older key names (``train``, ``train_split``,
``train_path``, ``train_limit``, ``synthetic_size``, ``synthetic_difficulty``) still read as the
fields they name (``metadata["aliases"]``, ``councilzoo.config``); a resolved config writes the
names below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from councilzoo.learners.recipe_checks import check_training_data, check_views
from councilzoo.tasks import Problem, load_problems
from councilzoo.tasks.rephrase import read_paraphrases, with_paraphrases

__all__ = ["DataConfig", "load_items"]


@dataclass
class DataConfig:
    """Training items: a synthetic generator or a dataset (see ``councilzoo.tasks.load_dataset``)."""

    dataset: str = field(
        default="synthetic:numeric",
        metadata={"help": "'synthetic:<kind>', a dataset name, or 'jsonl'/'json' with path.",
                  "aliases": ("train",)},
    )
    split: str = field(
        default="train",
        metadata={"help": "Dataset split (never an evaluation split).", "aliases": ("train_split",)},
    )
    path: str | None = field(
        default=None, metadata={"help": "Local JSON/JSONL file for the dataset.", "aliases": ("train_path",)}
    )
    paraphrases: str | None = field(
        default=None,
        metadata={"help": "JSONL of the items' paraphrases, for views > 0 (`councilzoo paraphrase`)."},
    )
    limit: int | None = field(
        default=None,
        metadata={"help": "Use at most this many items.", "minimum": 1, "aliases": ("train_limit",)},
    )
    num_problems: int = field(
        default=256,
        metadata={"help": "Number of synthetic items.", "minimum": 1, "aliases": ("synthetic_size",)},
    )
    difficulty: float = field(
        default=0.3,
        metadata={"help": "Synthetic difficulty in [0, 1].", "aliases": ("synthetic_difficulty",)},
    )

    def __post_init__(self) -> None:
        check_training_data(self.dataset, self.split, "data")


def load_items(data: DataConfig | Any, seed: int, views: Mapping[str, int] | None = None) -> list[Problem]:
    """Training or held-out items (a ``DataConfig``, or Co-RL's ``EvalConfig``: the same fields)
    through the one problem source (``tasks.load_problems``), with the paraphrases of
    ``data.paraphrases`` where given; refused (one line) when one of ``views`` (reader -> view)
    has no paraphrase to read."""
    items = load_problems(
        data.dataset,
        data.split,
        seed=seed,
        path=data.path,
        limit=data.limit,
        size=data.num_problems,
        difficulty=data.difficulty,
    )
    if getattr(data, "paraphrases", None):
        items = with_paraphrases(items, read_paraphrases(data.paraphrases))
    if views is not None:
        check_views(items, views, "data")
    return items
