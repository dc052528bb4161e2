"""Benchmark loaders on small fixtures in each dataset's real schema; offline errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from councilzoo.tasks import (
    DATASETS,
    DatasetUnavailableError,
    answers_equivalent,
    extract_answer,
    format_answer,
    load_dataset,
)
from councilzoo.tasks.grading import LETTERS

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
MATH500 = Path(__file__).resolve().parents[2] / "shared" / "data" / "math500_test.json"

EXPECTED = {  # name -> (number of problems, kind of the first, gold answer of the first)
    "gsm8k": (3, "numeric", "72"),
    "math500": (3, "math", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    "gpqa_diamond": (3, "multiple_choice", None),
    "medqa": (3, "multiple_choice", "D"),
    "amc23": (3, "math", "55"),
    "aime24": (3, "math", "24"),
    "mmlu_pro": (3, "multiple_choice", "C"),
    "hle": (3, "math", "101"),  # the image row is dropped
    "mathvista": (3, "numeric", "10"),  # images by path, as in the hub's "image" column
    "mathverse": (3, "multiple_choice", "B"),
    "mathvision": (3, "multiple_choice", "B"),
    "wemath": (3, "multiple_choice", "A"),
    "multimodal_open_r1": (3, "math", "10"),  # the row without an <answer> tag is dropped
}


@pytest.mark.parametrize("name", sorted(n for n, spec in DATASETS.items() if spec.kind != "code"))
def test_loader_reads_real_schema(name):  # code benchmarks: tests/test_tasks_code.py
    problems = load_dataset(name, path=FIXTURES / f"{name}.jsonl")
    count, kind, answer = EXPECTED[name]
    assert len(problems) == count
    assert problems[0].kind == kind
    if answer is not None:
        assert problems[0].answer == answer
    assert len({p.id for p in problems}) == count
    for p in problems:
        assert p.question and p.answer
        if p.kind == "multiple_choice":
            assert p.answer in LETTERS[: len(p.choices)]


def test_gsm8k_gold_drops_thousands_separator():
    assert load_dataset("gsm8k", path=FIXTURES / "gsm8k.jsonl")[1].answer == "7200"


def test_gpqa_choices_shuffled_deterministically_per_item():
    rows = [json.loads(line) for line in (FIXTURES / "gpqa_diamond.jsonl").read_text().splitlines()]
    first = load_dataset("gpqa_diamond", path=FIXTURES / "gpqa_diamond.jsonl", seed=0)
    again = load_dataset("gpqa_diamond", path=FIXTURES / "gpqa_diamond.jsonl", seed=0)
    assert first == again
    for p, row in zip(first, rows, strict=True):
        assert sorted(p.choices) == sorted(
            [row["Correct Answer"]] + [row[f"Incorrect Answer {k}"] for k in (1, 2, 3)]
        )
        assert p.choices[LETTERS.index(p.answer)] == row["Correct Answer"]
    other_seeds = [
        load_dataset("gpqa_diamond", path=FIXTURES / "gpqa_diamond.jsonl", seed=s) for s in range(8)
    ]
    assert len({tuple(p.choices for p in ps) for ps in other_seeds}) > 1


def test_hle_multiple_choice_options_split_from_question():
    hle = {p.id: p for p in load_dataset("hle", path=FIXTURES / "hle.jsonl")}
    mc = hle["hle-hle002"]
    assert mc.kind == "multiple_choice"
    assert mc.choices == ("Oxygen", "Nitrogen", "Argon", "Carbon dioxide")
    assert "Answer Choices" not in mc.question
    assert "hle-hle003" not in hle  # has an image


def test_local_problem_schema_and_limit():
    problems = load_dataset("jsonl", path=FIXTURES / "problems.jsonl")
    assert [p.id for p in problems] == ["local-1", "local-2", "local-3"]
    assert problems[1].choices == ("3", "4", "5", "7") and problems[2].answer is None
    subset = load_dataset("jsonl", path=FIXTURES / "problems.jsonl", limit=2, seed=1)
    assert len(subset) == 2 and subset == load_dataset(
        "jsonl", path=FIXTURES / "problems.jsonl", limit=2, seed=1
    )
    assert [p.id for p in subset] == sorted(p.id for p in subset)  # file order kept


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="gsm8k"):
        load_dataset("gsm9k")


def test_bad_local_rows_raise_clearly(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"q": "no schema"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl, line 1: unknown field"):
        load_dataset("jsonl", path=bad)
    with pytest.raises(ValueError, match="path="):
        load_dataset("jsonl")


def test_offline_without_cache_raises_clear_error(tmp_path, monkeypatch):
    import datasets.config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    # datasets reads these at import time; point the live config at the empty cache too
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets", raising=False)
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("gsm8k")
    message = str(info.value)
    assert "gsm8k" in message and "openai/gsm8k" in message and "path=" in message


@pytest.mark.skipif(not MATH500.exists(), reason=f"shared MATH-500 file not found at {MATH500}")
def test_math500_release_file_and_gold_self_equivalence():
    problems = load_dataset("json", path=MATH500)
    assert len(problems) == 500
    assert all(p.kind == "math" and p.answer for p in problems)
    failures = [p.id for p in problems if not answers_equivalent(f"\\boxed{{{p.answer}}}", p.answer, "math")]
    assert failures == []
    unread = [
        p.id for p in problems if extract_answer(format_answer(p.answer, "math"), "math") != p.answer.strip()
    ]
    assert unread == []


def test_unreachable_hub_fails_fast_without_retries(monkeypatch):
    """Not offline, but nothing answers at the hub: one quick probe, no 30 s of retries."""
    import socket
    import time

    import datasets.config
    from huggingface_hub import constants

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    named = rf"127\.0\.0\.1:{port} is unreachable.*HF_HUB_OFFLINE=1"
    with pytest.raises(DatasetUnavailableError, match=named):
        load_dataset("gsm8k")
    assert time.monotonic() - start < 5
