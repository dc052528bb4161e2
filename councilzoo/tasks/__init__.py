"""Problems, benchmark loaders, synthetic generators and grading."""

from councilzoo.tasks.code import (
    answers_for,
    answers_for_batch,
    pass_at_k,
    passes,
    program_for,
    stated_answer,
)
from councilzoo.tasks.datasets import DATASETS, DatasetUnavailableError, load_dataset
from councilzoo.tasks.grading import (
    answers_equivalent,
    extract_answer,
    extract_verdict,
    format_answer,
    plurality,
)
from councilzoo.tasks.problem import KINDS, Problem
from councilzoo.tasks.source import load_problems, split_seed
from councilzoo.tasks.synthetic import paraphrase, synthetic_problems

__all__ = [
    "DATASETS",
    "KINDS",
    "DatasetUnavailableError",
    "Problem",
    "answers_equivalent",
    "answers_for",
    "answers_for_batch",
    "stated_answer",
    "extract_answer",
    "extract_verdict",
    "format_answer",
    "load_dataset",
    "load_problems",
    "paraphrase",
    "pass_at_k",
    "passes",
    "plurality",
    "program_for",
    "split_seed",
    "synthetic_problems",
]
