"""Rows of visual math benchmarks (MathVista, MathVerse, MATH-Vision, We-Math) and of the image
training set Co-RL's release uses (multimodal-open-r1-8k-verified) -> Problems.

The converters are registered in ``councilzoo.tasks.datasets.DATASETS`` (one registry); each maps
its hub columns to a Problem with the figure in ``images`` and the dataset's own id. Options become
``choices`` with a letter answer; rows whose answer matches none of the options are dropped.
"""

from __future__ import annotations

import io
import re
from typing import Any

from PIL import Image

from councilzoo.tasks.grading import LETTERS
from councilzoo.tasks.images import ImageError, ImageInput, load_image
from councilzoo.tasks.problem import Problem

__all__ = [
    "Row", "mathvista_problem", "mathverse_problem", "mathvision_problem", "wemath_problem",
    "open_r1_problem",
]

Row = dict[str, Any]


def _row_image(value: Any) -> ImageInput:
    """A value of a datasets ``Image`` column as a Problem image: the decoded PIL image, the
    ``{"bytes", "path"}`` dict of an undecoded one (parquet read without its features), or a path."""
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, dict) and value.get("bytes"):
        return load_image(Image.open(io.BytesIO(value["bytes"])))
    if isinstance(value, dict) and value.get("path"):
        return value["path"]
    if isinstance(value, str) and value:
        return value
    raise ImageError(f"row has no usable image (got {type(value).__name__})")


def _letter_of(answer: str, choices: tuple[str, ...]) -> str | None:
    """The letter of ``answer`` among ``choices``: given as a letter ("B", "(B)") or as the option text."""
    text = answer.strip().strip("()").strip()
    if text in tuple(LETTERS[: len(choices)]):
        return text
    return LETTERS[choices.index(answer.strip())] if answer.strip() in choices else None


def mathvista_problem(row: Row, i: int, split: str, seed: int) -> Problem | None:
    """``question`` (the bare question; ``query`` adds the benchmark's prompt), ``choices`` holding
    option texts with the answer given as one of them; free-form answers are numbers or text."""
    image = row.get("decoded_image")
    choices = tuple(row.get("choices") or ()) if row["question_type"] == "multi_choice" else ()
    answer: str | None = str(row["answer"]).strip()
    question = row["question"].strip()
    if choices:
        answer, kind = _letter_of(answer, choices), "multiple_choice"
        if answer is None:
            return None
    else:
        kind = "numeric" if row.get("answer_type") in ("integer", "float") else "math"
        if row.get("answer_type") == "float" and row.get("precision") is not None:
            question += f"\n(Give the answer as a number with {int(row['precision'])} decimal place(s).)"
    meta = row.get("metadata") or {}
    return Problem(
        id=f"mathvista-{row['pid']}",
        question=question,
        answer=answer,
        kind=kind,
        choices=choices,
        source="mathvista",
        metadata={
            "answer_type": row.get("answer_type"),
            "unit": row.get("unit"),
            "precision": row.get("precision"),
            "category": meta.get("category"),
            "task": meta.get("task"),
            "skills": list(meta.get("skills") or []),
        },
        images=(_row_image(image if image is not None else row["image"]),),
    )


_MATHVERSE_CHOICES_RE = re.compile(r"\n\s*Choices:\s*\n?", re.IGNORECASE)
_MATHVERSE_OPTION_RE = re.compile(rf"^\(?([{LETTERS}])\)?\s*[:.)：]\s*(.*)$")


def _mathverse_options(question: str) -> tuple[str, tuple[str, ...]]:
    """(stem, option texts) of a question ending in a "Choices:" block of "A:..." lines; the
    question unchanged and no options where it has none (Vision Only: options in the figure)."""
    stem, *listing = _MATHVERSE_CHOICES_RE.split(question, maxsplit=1)
    lines = [line.strip() for line in "".join(listing).splitlines() if line.strip()]
    options = [_MATHVERSE_OPTION_RE.match(line) for line in lines]
    letters = "".join(m.group(1) for m in options if m)
    if not options or not all(options) or letters != LETTERS[: len(options)]:
        return question, ()
    return stem.strip(), tuple(m.group(2).strip() for m in options)


def mathverse_problem(row: Row, i: int, split: str, seed: int) -> Problem | None:
    """``question`` (empty in Vision Only rows, whose whole question is in the figure: then the
    benchmark's ``query_wo`` prompt); multi-choice answers are letters over the parsed options."""
    question = row["question"].strip() or row["query_wo"].strip()
    answer: str | None = str(row["answer"]).strip()
    choices: tuple[str, ...] = ()
    kind = "math"
    if row["question_type"] == "multi-choice":
        question, choices = _mathverse_options(question)
        kind = "multiple_choice"
        answer = _letter_of(answer, choices if choices else tuple(LETTERS))
        if answer is None:
            return None
    meta = row.get("metadata") or {}
    return Problem(
        id=f"mathverse-{row['sample_index']}",
        question=question,
        answer=answer,
        kind=kind,
        choices=choices,
        source="mathverse",
        metadata={
            "problem_index": row.get("problem_index"),
            "problem_version": row.get("problem_version"),
            "subject": meta.get("subject"),
            "subfield": meta.get("subfield"),
        },
        images=(_row_image(row["image"]),),
    )


def mathvision_problem(row: Row, i: int, split: str, seed: int) -> Problem | None:
    """``question`` (with ``<image1>`` markers), ``options`` (empty for free-form), ``answer``
    (a letter for multiple choice)."""
    choices = tuple(str(o) for o in row.get("options") or ())
    answer = str(row["answer"]).strip()
    if choices and answer not in tuple(LETTERS[: len(choices)]):
        return None
    image = row.get("decoded_image")
    return Problem(
        id=f"mathvision-{row['id']}",
        question=row["question"].strip(),
        answer=answer,
        kind="multiple_choice" if choices else "math",
        choices=choices,
        source="mathvision",
        metadata={"level": row.get("level"), "subject": row.get("subject"), "solution": row.get("solution")},
        images=(_row_image(image if image is not None else row["image"]),),
    )


_WEMATH_OPTION_RE = re.compile(rf"(?:^|[;；]\s*)([{LETTERS}])[.．、]\s*")


def _wemath_options(text: str) -> tuple[str, ...]:
    """The option texts of We-Math's "A. 3; B. 4; C. 5" string (empty if it does not parse)."""
    text = text.strip()
    marks = list(_WEMATH_OPTION_RE.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    options = tuple(text[m.end() : end].strip(" ;；") for m, end in zip(marks, ends, strict=True))
    letters = "".join(m.group(1) for m in marks)
    return options if len(options) >= 2 and letters == LETTERS[: len(options)] and all(options) else ()


def wemath_problem(row: Row, i: int, split: str, seed: int) -> Problem | None:
    """All multiple choice: ``option`` is one string of lettered options, ``answer`` a letter. A
    problem and its one-step sub-problems share ``ID``; ``key`` tells them apart ("2steps_1",
    "2steps_multi", ...)."""
    choices = _wemath_options(str(row["option"]))
    answer = str(row["answer"]).strip().upper()
    if answer not in tuple(LETTERS[: len(choices)]):
        return None
    return Problem(
        id=f"wemath-{row['ID']}-{row['key']}",
        question=row["question"].strip(),
        answer=answer,
        kind="multiple_choice",
        choices=choices,
        source="wemath",
        metadata={
            "group": str(row["ID"]),
            "key": row["key"],
            "knowledge_concept": row.get("knowledge concept"),
            "question_number": row.get("question number"),
        },
        images=(_row_image(row["image_path"]),),
    )


_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def open_r1_problem(row: Row, i: int, split: str, seed: int) -> Problem | None:
    """``problem`` (may hold an ``<image>`` marker, dropped: the figure is in ``images``),
    ``solution`` holding the answer in ``<answer>...</answer>`` (rows without one are dropped)."""
    found = _ANSWER_TAG_RE.search(str(row.get("solution") or ""))
    if found is None or not found.group(1).strip():
        return None
    return Problem(
        id=f"open-r1-8k-{i}",
        question=row["problem"].replace("<image>", "").strip(),
        answer=found.group(1).strip(),
        kind="math",
        source="multimodal_open_r1",
        images=(_row_image(row["image"]),),
    )
