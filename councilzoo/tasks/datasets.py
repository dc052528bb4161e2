"""Benchmark loaders: Hugging Face datasets (or local files in the same schema) -> Problems.

``load_dataset(name)`` reads a benchmark through ``datasets.load_dataset`` with its real hub id,
config and column names; ``path=`` reads the same schema from a local JSON/JSONL/Parquet/CSV file
through datasets' file builders instead. ``name="jsonl"`` (or ``"json"``) reads a local file of
``Problem`` dicts, or the MATH-500 release shape (``prompt``/``answer``/``source``/``id``).
Code benchmarks (``humaneval``, ``mbpp``, ``livecodebench``) give ``kind="code"`` problems whose
label-free test inputs are read from the tests (argument tuples parsed out of the assertions with
``ast``, or LiveCodeBench's stdin texts), never their expected outputs; their ``answer`` is the
output signature of the reference (see ``councilzoo.tasks.code``). Visual benchmarks
(``mathvista``, ``mathverse``, ``mathvision``, ``wemath``; converters in
``councilzoo.tasks.visual_datasets``) give Problems with the figure in ``images``.
Nothing ever falls back to other or built-in data: a dataset that cannot be read raises
``DatasetUnavailableError`` naming the dataset, its hub id and how to pass a local file.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import io
import json
import os
import pickle
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.sandbox.values import canonical, canonical_stdout, digits_unlimited
from councilzoo.tasks.code import CODE_REPLY, with_reference_answers
from councilzoo.tasks.grading import LETTERS
from councilzoo.tasks.images import HASH_PREFIX, ImageError, load_image
from councilzoo.tasks.problem import Problem, answer_text
from councilzoo.tasks.visual_datasets import (
    mathverse_problem,
    mathvision_problem,
    mathvista_problem,
    open_r1_problem,
    wemath_problem,
)

__all__ = ["Row", "DatasetUnavailableError", "DATASETS", "load_dataset"]

Row = dict[str, Any]


class DatasetUnavailableError(RuntimeError):
    """A benchmark could not be read from the hub, the local cache or the given file."""


@dataclass(frozen=True)
class _DatasetSpec:
    """Where a benchmark lives and how one of its rows becomes a Problem."""

    hub_id: str
    config: str | None
    convert: Callable[[Row, int, str, int], Problem | None]
    splits: dict[str, str] = field(default_factory=dict)  # our split name -> the hub's
    kind: str = "math"
    releases: dict[str, list[str]] = field(default_factory=dict)  # release -> hub data files
    default_release: str | None = None
    date_field: str | None = None  # rows outside ``window`` are dropped


def _stable_rng(seed: int, key: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


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
        answer=answer_text(row["answer"]).strip(),
        kind="math",
        source="amc23",
        metadata={"url": row.get("url")},
    )


def _aime24(row: Row, i: int, split: str, seed: int) -> Problem:
    return Problem(
        id=f"aime24-{row.get('id', i)}",
        question=row["problem"],
        answer=answer_text(row["answer"]).strip(),
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


def _call_inputs(test_code: str, callee: str) -> list[str]:
    """The literal argument tuples of every ``callee(...)`` call in ``test_code``, deduplicated,
    as Python literal texts; calls with computed or keyword arguments are skipped."""
    try:
        tree = ast.parse(test_code)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == callee):
            continue
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        try:
            with digits_unlimited():  # the dataset's own literals: ints of any size
                text = repr(tuple(ast.literal_eval(a) for a in node.args))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if text not in found:
            found.append(text)
    return found


def _import_lines(code: str) -> str:
    """The top-level import statements of ``code`` (HumanEval prompts import ``typing``, ``math``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(ast.get_source_segment(code, n) or "" for n in imports)


def _humaneval(row: Row, i: int, split: str, seed: int) -> Problem:
    entry, prompt, test = _text(row, "entry_point"), _text(row, "prompt"), _text(row, "test")
    _python(test, "test")
    solution = prompt + _text(row, "canonical_solution")
    _python(solution, "canonical_solution")
    return Problem(
        id=_text(row, "task_id"),
        question=f"Complete this Python function.\n\n```python\n{prompt}```\n{CODE_REPLY}",
        answer=None,
        kind="code",
        source="humaneval",
        metadata={
            "entry_point": entry,
            "test_inputs": _call_inputs(test, "candidate"),
            "test_script": f"{test}\n\ncheck({entry})\n",
            "solution": solution,
            "prefix": prompt,
            "preamble": _import_lines(prompt),
        },
    )


def _defined_names(code: str) -> list[str]:
    try:
        return [n.name for n in ast.parse(code).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    except SyntaxError:
        return []


def _mbpp(row: Row, i: int, split: str, seed: int) -> Problem | None:
    test_list = row.get("test_list")
    if not isinstance(test_list, list) or not test_list or not all(isinstance(t, str) for t in test_list):
        raise _RowError(f"field 'test_list' must be a non-empty list of assert lines, got {test_list!r:.60}")
    tests = "\n".join(test_list)
    code = _text(row, "code")
    _python(code, "code")
    defined = _defined_names(code)
    calls = [n for n in ast.walk(_python(tests, "test_list")) if isinstance(n, ast.Call)]
    called = [n.func.id for n in calls if isinstance(n.func, ast.Name)]
    entry = next((name for name in called if name in defined), None)
    if entry is None:
        return None  # the tests call no function the reference defines: nothing to vote on
    imports = "\n".join(row.get("test_imports") or [])
    return Problem(
        id=f"mbpp-{row['task_id']}",
        question=f"{_text(row, 'prompt')}\nYour code should pass this test:\n{test_list[0]}\n{CODE_REPLY}",
        answer=None,
        kind="code",
        source="mbpp",
        metadata={
            "entry_point": entry,
            "test_inputs": _call_inputs(tests, entry),
            "test_script": f"{imports}\n{tests}\n",
            "solution": code,
            "preamble": imports,
        },
    )


class _NoGlobalsUnpickler(pickle.Unpickler):
    """LiveCodeBench packs private tests as a pickled string; anything beyond plain data is refused."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing {module}.{name} in a LiveCodeBench test payload")


def _lcb_tests(text: str) -> list[dict]:
    if not text:
        return []
    try:
        return json.loads(text)
    except ValueError:
        payload = zlib.decompress(base64.b64decode(text.encode("utf-8")))
        return json.loads(_NoGlobalsUnpickler(io.BytesIO(payload)).load())


def _livecodebench(row: Row, i: int, split: str, seed: int) -> Problem | None:
    tests = _lcb_tests(row["public_test_cases"]) + _lcb_tests(row.get("private_test_cases") or "")
    if not tests:
        return None
    meta = json.loads(row.get("metadata") or "{}")
    functional = tests[0].get("testtype") == "functional"
    starter = row.get("starter_code") or ""
    if functional:
        entry = meta.get("func_name")
        with digits_unlimited():  # the dataset's own values: ints of any size
            inputs = [repr(tuple(json.loads(line) for line in t["input"].splitlines())) for t in tests]
            expected = [canonical(json.loads(t["output"])) for t in tests]
        how = f"Use this starter code:\n```python\n{starter}\n```"
    else:
        entry, how = None, "Read the input from standard input and write the answer to standard output."
        inputs = [t["input"] for t in tests]
        expected = [canonical_stdout(t["output"]) for t in tests]
    return Problem(
        id=f"lcb-{row['question_id']}",
        question=f"{row['question_title']}\n\n{row['question_content']}\n\n{how}\n{CODE_REPLY}",
        answer=None,
        kind="code",
        source="livecodebench",
        metadata={
            "entry_point": entry,
            "test_inputs": inputs,
            "expected_outputs": expected,
            "prefix": starter,
            "platform": row.get("platform"),
            "difficulty_label": row.get("difficulty"),
            "contest_date": str(row.get("contest_date") or ""),
        },
    )


LCB_RELEASES = {
    f"release_v{n}": ["test.jsonl"] + [f"test{k}.jsonl" for k in range(2, n + 1)] for n in range(1, 7)
}  # cumulative, as the hub's loading script defines them; "v{n}" alone is one file
LCB_RELEASES.update({"v1": ["test.jsonl"], **{f"v{k}": [f"test{k}.jsonl"] for k in range(2, 7)}})

DATASETS: dict[str, _DatasetSpec] = {
    "gsm8k": _DatasetSpec("openai/gsm8k", "main", _gsm8k, kind="numeric"),
    "math500": _DatasetSpec("HuggingFaceH4/MATH-500", None, _math500),
    "gpqa_diamond": _DatasetSpec(
        "Idavidrein/gpqa", "gpqa_diamond", _gpqa, {"test": "train"}, kind="multiple_choice"
    ),
    "medqa": _DatasetSpec("GBaker/MedQA-USMLE-4-options", None, _medqa, kind="multiple_choice"),
    "amc23": _DatasetSpec("math-ai/amc23", None, _amc23),
    "aime24": _DatasetSpec("HuggingFaceH4/aime_2024", None, _aime24, {"test": "train"}),
    "mmlu_pro": _DatasetSpec("TIGER-Lab/MMLU-Pro", None, _mmlu_pro, kind="multiple_choice"),
    "hle": _DatasetSpec("cais/hle", None, _hle),
    "humaneval": _DatasetSpec("openai/openai_humaneval", None, _humaneval, kind="code"),
    "mbpp": _DatasetSpec("google-research-datasets/mbpp", "sanitized", _mbpp, kind="code"),
    "livecodebench": _DatasetSpec(
        "livecodebench/code_generation_lite",
        None,
        _livecodebench,
        kind="code",
        releases=LCB_RELEASES,
        default_release="release_v6",
        date_field="contest_date",
    ),
    "mathvista": _DatasetSpec("AI4Math/MathVista", None, mathvista_problem, {"test": "testmini"}),
    "mathverse": _DatasetSpec("AI4Math/MathVerse", "testmini", mathverse_problem, {"test": "testmini"}),
    "mathvision": _DatasetSpec("MathLLMs/MathVision", None, mathvision_problem),  # splits test, testmini
    "wemath": _DatasetSpec(
        "We-Math/We-Math", None, wemath_problem, {"test": "testmini"}, kind="multiple_choice"
    ),
    # Co-RL's multimodal training set (the release's VLM example); train split only
    "multimodal_open_r1": _DatasetSpec("lmms-lab/multimodal-open-r1-8k-verified", None, open_r1_problem),
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


def _read_hub(name: str, spec: _DatasetSpec, split: str, release: str | None) -> list[Row]:
    import datasets

    hub_split = spec.splits.get(split, split)
    unreachable = None if datasets.config.HF_HUB_OFFLINE else _hub_unreachable()  # offline: cache only
    try:
        if unreachable:
            raise ConnectionError(unreachable)
        if spec.releases:  # the release's JSONL files, read without the hub's loading script
            files = spec.releases[release or spec.default_release]
            return list(datasets.load_dataset(spec.hub_id, data_files={hub_split: files}, split=hub_split))
        return list(datasets.load_dataset(spec.hub_id, spec.config, split=hub_split))
    except Exception as err:  # offline, no cache, gated, renamed...: one clear message
        raise DatasetUnavailableError(
            f"Cannot load dataset {name!r} (hub id {spec.hub_id!r}, config {spec.config!r}, split "
            f"{hub_split!r}): {type(err).__name__}: {err}. If you are offline, download it once where "
            f"the hub is reachable, or pass a local copy in the same schema: "
            f"load_dataset({name!r}, path='file.jsonl' | '.json' | '.parquet' | '.csv') (--path FILE "
            f"on the command line)."
        ) from err


class _RowError(ValueError):
    """One row of a dataset that cannot become a Problem; the message names the field."""


def _text(row: Row, name: str) -> str:
    """Field ``name`` of ``row``, which must be a string."""
    if name not in row:
        raise _RowError(f"missing field {name!r}")
    if not isinstance(row[name], str):
        raise _RowError(f"field {name!r} must be a string, got {type(row[name]).__name__}")
    return row[name]


def _python(code: str, name: str) -> ast.Module:
    """``code`` (field ``name``) parsed as Python, or a ``_RowError`` saying where it does not parse."""
    try:
        return ast.parse(code)
    except SyntaxError as err:
        raise _RowError(f"field {name!r} is not valid Python (its line {err.lineno}: {err.msg})") from None


def _file_rows(path: Path) -> list[tuple[str, Any]]:
    """``(where, row)`` for every record of a local file, ``where`` naming the file and the line
    (JSONL), the item (a JSON array) or the row (Parquet, CSV), so a bad record is found at once."""
    suffix = path.suffix.lower()
    if suffix not in _BUILDERS:
        raise ValueError(f"cannot read {path}: expected one of {sorted(_BUILDERS)}")
    if suffix in (".parquet", ".csv"):
        import datasets

        rows = datasets.load_dataset(_BUILDERS[suffix], data_files=str(path), split="train")
        return [(f"{path}, row {i + 1}", row) for i, row in enumerate(rows)]
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from None
        return [(f"{path}, item {i + 1}", row) for i, row in enumerate(items)]
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append((f"{path}, line {number}", json.loads(line)))
            except ValueError as err:
                raise ValueError(f"{path}, line {number}: not valid JSON ({err})") from None
    return rows


def _checked_rows(rows: list[tuple[str, Any]]) -> list[tuple[str, Row]]:
    for where, row in rows:
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object (one problem), got {json.dumps(row)[:40]}")
    return rows


def _convert_rows(name: str, spec: _DatasetSpec, rows: list[tuple[str, Row]], split: str, seed: int):
    """``(where, problem)`` for every row through ``spec.convert``; a row it cannot read is an error
    naming row and field."""
    problems = []
    for i, (where, row) in enumerate(_checked_rows(rows)):
        try:
            problem = spec.convert(row, i, split, seed)
        except _RowError as err:
            raise ValueError(f"{where}: {err} (a {name} row)") from None
        except KeyError as err:
            raise ValueError(f"{where}: missing field {err} (a {name} row)") from None
        except (TypeError, AttributeError, ValueError) as err:
            raise ValueError(f"{where}: not a {name} row: {type(err).__name__}: {err}") from None
        if problem is not None:
            problems.append((where, problem))
    return problems


PROBLEM_FIELDS = ("id", "question", "answer", "kind", "choices", "source", "metadata", "images")


def _read_local_problems(path: Path) -> list[tuple[str, Problem]]:
    """``(where, problem)`` for a JSON array or JSONL file of Problem dicts (``images``: image file
    paths), or of MATH-500 release rows (``prompt``/``answer``/``source``/``id``)."""
    problems = []
    for i, (where, row) in enumerate(_checked_rows(_file_rows(path))):
        if "prompt" in row and "question" not in row:  # MATH-500 release shape
            row = {
                "id": row.get("id", f"{path.stem}-{i:05d}"),
                "question": row["prompt"],
                "answer": row.get("answer"),
                "kind": "math",
                "source": row.get("source", ""),
            }
        unknown = sorted(set(row) - set(PROBLEM_FIELDS))
        missing = [k for k in ("id", "question") if k not in row]
        if unknown or missing:
            raise ValueError(
                f"{where}: {f'unknown field(s) {unknown}' if unknown else f'missing field {missing[0]!r}'}; "
                f"a problem has {list(PROBLEM_FIELDS)} (id and question required), or is a MATH-500 "
                "row (prompt, answer, source, id)"
            )
        for key in ("question", "kind", "source"):
            if key in row:
                try:
                    _text(row, key)
                except _RowError as err:
                    raise ValueError(f"{where}: {err}") from None
        try:
            problems.append((where, Problem.from_dict({"answer": None, **row})))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None
    return problems


def _local_image_paths(problems: list[Problem], folder: Path) -> list[Problem]:
    """Image paths of a local file's problems resolved against its folder (relative ones) and
    checked to exist, so a missing figure fails at load time, not mid-run."""
    out = []
    for problem in problems:
        resolved = []
        for image in problem.images:
            if not isinstance(image, (str, os.PathLike)):
                resolved.append(image)
                continue
            text = os.fspath(image)
            if text.startswith(HASH_PREFIX):
                load_image(text)  # raises: a hash-only log entry has no pixels to read
            full = folder / Path(text).expanduser()  # an absolute path stays as it is
            if not full.is_file():
                raise ImageError(f"problem {problem.id!r}: image file {text!r} does not exist ({full})")
            resolved.append(str(full))
        out.append(dataclasses.replace(problem, images=tuple(resolved)))
    return out


def load_dataset(
    name: str,
    split: str = "test",
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
    release: str | None = None,
    window: tuple[str | None, str | None] | None = None,
    require_answers: bool = False,
) -> list[Problem]:
    """Problems of benchmark ``name`` (see ``DATASETS``) or of a local file (``"jsonl"``/``"json"``).

    ``path`` reads a named benchmark from a local file in its hub schema. ``split`` uses our names;
    benchmarks published only as "train" (gpqa_diamond, aime24) map "test" to it. ``seed`` fixes
    GPQA's per-item choice order and the ``limit`` subset (a seeded sample kept in file order).
    LiveCodeBench only: ``release`` picks the hub release (``"release_v6"``, cumulative, or
    ``"v5"`` alone) and ``window=(start, end)`` keeps problems with ``start <= contest_date < end``
    (ISO dates; either bound may be None). Code benchmarks run their reference solutions once, in
    the sandbox, to label ``answer`` with the reference's output signature. ``require_answers``
    (evaluation scores every problem against its answer) refuses problems left without one,
    naming each one's file and line.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    spec = DATASETS.get(name)
    if release is not None and (spec is None or release not in spec.releases):
        known = sorted(spec.releases) if spec is not None else []
        raise ValueError(f"dataset {name!r} has no release {release!r}; known: {known}")
    if window is not None and (spec is None or spec.date_field is None):
        raise ValueError(f"dataset {name!r} has no date to filter a window on")
    if name in LOCAL_FORMATS:
        if path is None:
            raise ValueError(f"load_dataset({name!r}) reads a local file: pass path='problems.{name}'")
        placed = _read_local_problems(Path(path))
    elif name in DATASETS:
        if path is not None:
            rows = _checked_rows(_file_rows(Path(path)))
        else:
            hub_rows = _read_hub(name, spec, split, release)
            rows = [(f"{name} ({spec.hub_id}) row {i + 1}", r) for i, r in enumerate(hub_rows)]
        if window is not None:
            rows = [(w, r) for w, r in rows if _in_window(str(r.get(spec.date_field) or ""), window)]
        placed = _convert_rows(name, spec, rows, split, seed)
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS) + list(LOCAL_FORMATS)}")
    wheres, problems = [w for w, _ in placed], [p for _, p in placed]
    if path is not None:
        problems = _local_image_paths(problems, Path(path).parent)
    if limit is not None and limit < len(problems):
        keep = np.sort(np.random.default_rng(seed).choice(len(problems), size=limit, replace=False))
        problems, wheres = [problems[k] for k in keep], [wheres[k] for k in keep]
    if spec is not None and spec.kind == "code":
        problems = with_reference_answers(problems)
    if require_answers:
        _check_answers(problems, wheres)
    return problems


MAX_LISTED = 10  # rows named one per line; beyond them, a count


def _check_answers(problems: list[Problem], wheres: list[str]) -> None:
    """A ``ValueError`` naming every problem without an answer (file and line), one per line."""
    missing = [
        f"{where}: problem {p.id!r} has no answer, and evaluation scores every problem against its "
        "answer; add one, or drop the row"
        + (" (its reference solution fails on its own inputs)" if p.metadata.get("solution") else "")
        for where, p in zip(wheres, problems, strict=True)
        if p.answer is None
    ]
    if len(missing) > MAX_LISTED:
        missing[MAX_LISTED:] = [f"... and {len(missing) - MAX_LISTED} more rows without an answer"]
    if missing:
        raise ValueError("\n".join(missing))


def _in_window(date: str, window: tuple[str | None, str | None]) -> bool:
    """ISO dates and datetimes compare as text; a row without a date is outside every window."""
    start, end = window
    return bool(date) and (start is None or date >= start) and (end is None or date < end)
