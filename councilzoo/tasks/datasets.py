"""Benchmark loaders: Hugging Face datasets (or local files in the same schema) -> Problems.

``load_dataset(name)`` reads a benchmark through ``datasets.load_dataset`` with its real hub id,
config and column names; ``path=`` reads the same schema from a local JSON/JSONL/Parquet/CSV file
through datasets' file builders instead. ``name="jsonl"`` (or ``"json"``) reads a local file of
``Problem`` dicts, or the MATH-500 release shape (``prompt``/``answer``/``source``/``id``).
Nothing ever falls back to other or built-in data: a dataset that cannot be read raises
``DatasetUnavailableError`` naming the dataset, its hub id and how to pass a local file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.tasks.grading import LETTERS
from councilzoo.tasks.problem import Problem

Row = dict[str, Any]


class DatasetUnavailableError(RuntimeError):
    """A benchmark could not be read from the hub, the local cache or the given file."""


@dataclass(frozen=True)
class DatasetSpec:
    """Where a benchmark lives and how one of its rows becomes a Problem."""

    hub_id: str
    config: str | None
    convert: Callable[[Row, int, str, int], Problem | None]
    splits: dict[str, str] = field(default_factory=dict)  # our split name -> the hub's
    kind: str = "math"


def _stable_rng(seed: int, key: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _number_text(value: Any) -> str:
    """27.0 -> "27" (AMC/AIME answers are stored as floats or ints in some releases)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _gsm8k(row: Row, i: int, split: str, seed: int) -> Problem:
    solution, _, gold = row["answer"].rpartition("####")
    return Problem(
        id=f"gsm8k-{split}-{i:05d}",
        question=row["question"],
        answer=gold.strip().replace(",", ""),
        kind="numeric",
        source="gsm8k",
        metadata={"solution": solution.strip()},
    )


def _math500(row: Row, i: int, split: str, seed: int) -> Problem:
    return Problem(
        id=row["unique_id"],
        question=row["problem"],
        answer=row["answer"],
        kind="math",
        source="math500",
        metadata={"subject": row.get("subject"), "level": row.get("level"), "solution": row.get("solution")},
    )


def _gpqa(row: Row, i: int, split: str, seed: int) -> Problem:
    item_id = row.get("Record ID") or f"gpqa-{i:04d}"
    options = [row["Correct Answer"]] + [row[f"Incorrect Answer {k}"] for k in (1, 2, 3)]
    order = _stable_rng(seed, item_id).permutation(len(options))  # deterministic per item id
    return Problem(
        id=item_id,
        question=row["Question"].strip(),
        answer=LETTERS[int(np.flatnonzero(order == 0)[0])],
        kind="multiple_choice",
        choices=tuple(options[k].strip() for k in order),
        source="gpqa_diamond",
        metadata={"domain": row.get("High-level domain"), "subdomain": row.get("Subdomain")},
    )


def _medqa(row: Row, i: int, split: str, seed: int) -> Problem:
    options = row["options"]
    letters = sorted(options)
    return Problem(
        id=f"medqa-{split}-{i:05d}",
        question=row["question"],
        answer=row["answer_idx"],
        kind="multiple_choice",
        choices=tuple(options[k] for k in letters),
        source="medqa",
        metadata={"meta_info": row.get("meta_info")},
    )


def _amc23(row: Row, i: int, split: str, seed: int) -> Problem:
    return Problem(
        id=f"amc23-{row.get('id', i)}",
        question=row["question"],
        answer=_number_text(row["answer"]),
        kind="math",
        source="amc23",
        metadata={"url": row.get("url")},
    )


def _aime24(row: Row, i: int, split: str, seed: int) -> Problem:
    return Problem(
        id=f"aime24-{row.get('id', i)}",
        question=row["problem"],
        answer=_number_text(row["answer"]),
        kind="math",
        source="aime24",
        metadata={"url": row.get("url"), "solution": row.get("solution")},
    )


def _mmlu_pro(row: Row, i: int, split: str, seed: int) -> Problem:
    return Problem(
        id=f"mmlu_pro-{row['question_id']}",
        question=row["question"],
        answer=row["answer"],
        kind="multiple_choice",
        choices=tuple(row["options"]),
        source="mmlu_pro",
        metadata={"category": row.get("category"), "src": row.get("src")},
    )


_HLE_CHOICES_RE = re.compile(r"\n\s*Answer Choices:\s*\n")
_HLE_OPTION_RE = re.compile(rf"^([{LETTERS}])[.)]\s*(.*)$")


def _hle(row: Row, i: int, split: str, seed: int) -> Problem | None:
    """Text-only rows; multiple-choice options are split out of the question text."""
    if row.get("image"):
        return None
    question, choices = row["question"], ()
    if row["answer_type"] == "multipleChoice":
        stem, *listing = _HLE_CHOICES_RE.split(question, maxsplit=1)
        lines = [line.strip() for line in "".join(listing).splitlines() if line.strip()]
        options = [_HLE_OPTION_RE.match(line) for line in lines]
        if row["answer"].strip() not in LETTERS or not options or not all(options):
            return None  # options beyond J or not in the "A. text" layout: not gradable here
        question, choices = stem.strip(), tuple(m.group(2) for m in options)
    return Problem(
        id=f"hle-{row['id']}",
        question=question,
        answer=row["answer"].strip(),
        kind="multiple_choice" if choices else "math",
        choices=choices,
        source="hle",
        metadata={"category": row.get("category"), "answer_type": row["answer_type"]},
    )


DATASETS: dict[str, DatasetSpec] = {
    "gsm8k": DatasetSpec("openai/gsm8k", "main", _gsm8k, kind="numeric"),
    "math500": DatasetSpec("HuggingFaceH4/MATH-500", None, _math500),
    "gpqa_diamond": DatasetSpec(
        "Idavidrein/gpqa", "gpqa_diamond", _gpqa, {"test": "train"}, kind="multiple_choice"
    ),
    "medqa": DatasetSpec("GBaker/MedQA-USMLE-4-options", None, _medqa, kind="multiple_choice"),
    "amc23": DatasetSpec("math-ai/amc23", None, _amc23),
    "aime24": DatasetSpec("HuggingFaceH4/aime_2024", None, _aime24, {"test": "train"}),
    "mmlu_pro": DatasetSpec("TIGER-Lab/MMLU-Pro", None, _mmlu_pro, kind="multiple_choice"),
    "hle": DatasetSpec("cais/hle", None, _hle),
}
LOCAL_FORMATS = ("jsonl", "json")
_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be reached, or None: one quick TCP connect, so a machine
    without network fails in seconds instead of after the hub client's retries (~30 s)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        port = url.port or (80 if url.scheme == "http" else 443)
        socket.create_connection((url.hostname, port), timeout=timeout).close()
    except OSError as err:
        return (
            f"the hub at {constants.ENDPOINT} is unreachable ({err}); with a cached copy, set "
            "HF_HUB_OFFLINE=1 to read it"
        )
    return None


def _read_hub(name: str, spec: DatasetSpec, split: str) -> list[Row]:
    import datasets

    hub_split = spec.splits.get(split, split)
    unreachable = None if datasets.config.HF_HUB_OFFLINE else _hub_unreachable()  # offline: cache only
    try:
        if unreachable:
            raise ConnectionError(unreachable)
        return list(datasets.load_dataset(spec.hub_id, spec.config, split=hub_split))
    except Exception as err:  # offline, no cache, gated, renamed...: one clear message
        raise DatasetUnavailableError(
            f"Cannot load dataset {name!r} (hub id {spec.hub_id!r}, config {spec.config!r}, split "
            f"{hub_split!r}): {type(err).__name__}: {err}. If you are offline, download it once where "
            f"the hub is reachable, or pass a local copy in the same schema: "
            f"load_dataset({name!r}, path='file.jsonl' | '.json' | '.parquet' | '.csv') (--path FILE "
            f"on the command line)."
        ) from err


def _read_file(name: str, path: Path) -> list[Row]:
    import datasets

    builder = _BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"{name}: cannot read {path}: expected one of {sorted(_BUILDERS)}")
    return list(datasets.load_dataset(builder, data_files=str(path), split="train"))


def _read_local_problems(path: Path) -> list[Problem]:
    """A JSON array or JSONL file of Problem dicts, or of MATH-500 release rows."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json" or text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    problems = []
    for i, row in enumerate(rows):
        if "prompt" in row and "question" not in row:  # MATH-500 release shape
            row = {
                "id": row.get("id", f"{path.stem}-{i:05d}"),
                "question": row["prompt"],
                "answer": row.get("answer"),
                "kind": "math",
                "source": row.get("source", ""),
            }
        try:
            problems.append(Problem.from_dict(row))
        except TypeError as err:
            raise ValueError(
                f"{path}: row {i} is neither a Problem dict (id, question, answer, kind, choices, "
                f"source, metadata) nor a MATH-500 row (prompt, answer, source, id): {err}"
            ) from err
    return problems


def load_dataset(
    name: str,
    split: str = "test",
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
) -> list[Problem]:
    """Problems of benchmark ``name`` (see ``DATASETS``) or of a local file (``"jsonl"``/``"json"``).

    ``path`` reads a named benchmark from a local file in its hub schema. ``split`` uses our names;
    benchmarks published only as "train" (gpqa_diamond, aime24) map "test" to it. ``seed`` fixes
    GPQA's per-item choice order and the ``limit`` subset (a seeded sample kept in file order).
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    if name in LOCAL_FORMATS:
        if path is None:
            raise ValueError(f"load_dataset({name!r}) reads a local file: pass path='problems.{name}'")
        problems = _read_local_problems(Path(path))
    elif name in DATASETS:
        spec = DATASETS[name]
        rows = _read_file(name, Path(path)) if path is not None else _read_hub(name, spec, split)
        converted = (spec.convert(row, i, split, seed) for i, row in enumerate(rows))
        problems = [p for p in converted if p is not None]
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS) + list(LOCAL_FORMATS)}")
    if limit is not None and limit < len(problems):
        keep = np.sort(np.random.default_rng(seed).choice(len(problems), size=limit, replace=False))
        problems = [problems[k] for k in keep]
    return problems
