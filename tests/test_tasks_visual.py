"""Problems with images: the synthetic visual task (answers checked from the pixels) and the
visual benchmark loaders on local files in each hub schema (parquet with an Image column)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageDraw

from councilzoo.tasks import (
    KINDS,
    DatasetUnavailableError,
    Problem,
    answers_equivalent,
    load_dataset,
    load_problems,
    paraphrase,
    synthetic_problems,
)
from councilzoo.tasks.grading import LETTERS
from councilzoo.tasks.images import ImageError, image_digest
from councilzoo.tasks.visual import CELL, COLOURS, GRID, TEMPLATES

VISUAL_DATASETS = {
    "mathvista": "AI4Math/MathVista",
    "mathverse": "AI4Math/MathVerse",
    "mathvision": "MathLLMs/MathVision",
    "wemath": "We-Math/We-Math",
}


def _digests(problems):
    return [image_digest(p.images[0]) for p in problems]


def _near(pixels: np.ndarray, colour) -> np.ndarray:
    return (np.abs(pixels.astype(int) - np.array(colour)) < 70).all(axis=-1)


def _count_from_pixels(image: Image.Image, colour: str, shape: str) -> int:
    """Shapes of ``colour`` and kind ``shape`` in a count_shapes image, found cell by cell: a
    square fills its bounding box, a circle ~79% of it, a triangle half."""
    pixels = np.asarray(image)
    found = 0
    for row in range(GRID):
        for col in range(GRID):
            mask = _near(
                pixels[row * CELL : (row + 1) * CELL, col * CELL : (col + 1) * CELL], COLOURS[colour]
            )
            if mask.sum() < 40:
                continue
            ys, xs = np.nonzero(mask)
            fill = mask.sum() / ((np.ptp(ys) + 1) * (np.ptp(xs) + 1))
            kind = "square" if fill > 0.9 else ("circle" if fill > 0.65 else "triangle")
            found += kind == shape
    return found


# --- synthetic:visual -------------------------------------------------------------------------


def test_same_seed_same_pixels_and_prefix_stable():
    a = synthetic_problems("visual", 12, seed=3)
    b = synthetic_problems("visual", 12, seed=3)
    assert a == b and _digests(a) == _digests(b)
    assert _digests(a[:4]) == _digests(synthetic_problems("visual", 4, seed=3))
    assert _digests(a) != _digests(synthetic_problems("visual", 12, seed=4))
    assert [p.id for p in a[:2]] == ["visual-s3-00000", "visual-s3-00001"]


def test_visual_is_a_task_not_a_problem_kind():
    assert "visual" not in KINDS
    with pytest.raises(ValueError, match="kind"):
        Problem("x", "q", "1", kind="visual")
    test = load_problems("synthetic:visual", "test", seed=0, size=8)
    dev = load_problems("synthetic:visual", "dev", seed=0, size=8)
    assert {p.kind for p in test + dev} <= {"numeric", "multiple_choice"}
    assert all(len(p.images) == 1 and max(p.images[0].size) <= 128 for p in test)
    assert set(_digests(test)).isdisjoint(_digests(dev))


def test_metadata_contract_and_templates():
    problems = synthetic_problems("visual", 60, seed=0)
    assert {p.metadata["template"] for p in problems} == set(TEMPLATES)
    for p in problems:
        meta = p.metadata
        assert 0.0 <= meta["difficulty"] <= 1.0
        assert len(set(meta["paraphrases"]) | {p.question}) == len(meta["paraphrases"]) + 1 >= 3
        assert "image" in p.question or "chart" in p.question  # a text-only reader knows to look
        assert len(meta["distractors"]) == len(set(meta["distractors"])) >= 3
        assert not any(answers_equivalent(w, p.answer, p.kind) for w in meta["distractors"])
        if p.kind == "multiple_choice":
            assert sorted(p.choices) == sorted(COLOURS) and p.answer in LETTERS[:4]
            assert set(meta["distractors"]) == set(LETTERS[:4]) - {p.answer}


@pytest.mark.parametrize("difficulty", [0.0, 0.5, 1.0])
def test_count_answers_match_the_pixels(difficulty):
    items = [
        p
        for p in synthetic_problems("visual", 60, seed=1, difficulty=difficulty)
        if p.metadata["template"] == "count_shapes"
    ]
    assert len(items) >= 10
    for p in items:
        colour, shape = p.question.split("How many ")[1].split(" are")[0].rstrip("s").split()
        assert _count_from_pixels(p.images[0], colour, shape) == int(p.answer), p.id


@pytest.mark.parametrize("difficulty", [0.0, 1.0])
def test_tallest_bar_answer_matches_the_pixels(difficulty):
    items = [
        p
        for p in synthetic_problems("visual", 60, seed=2, difficulty=difficulty)
        if p.metadata["template"] == "tallest_bar"
    ]
    assert len(items) >= 10
    for p in items:
        pixels = np.asarray(p.images[0])
        height = {name: _near(pixels, rgb).any(axis=1).sum() for name, rgb in COLOURS.items()}
        assert max(height, key=height.get) == p.choices[LETTERS.index(p.answer)], p.id


def test_larger_number_distractors_hold_the_smaller_number():
    items = [p for p in synthetic_problems("visual", 40, seed=5) if p.metadata["template"] == "larger_number"]
    assert items
    for p in items:
        assert int(p.metadata["distractors"][0]) < int(p.answer)
        ink = np.asarray(p.images[0].convert("L")) < 100
        half = ink.shape[1] // 2
        assert ink[:, :half].any() and ink[:, half:].any()  # one number per half


def test_difficulty_changes_the_image():
    easy = synthetic_problems("visual", 40, seed=7, difficulty=0.1)
    hard = synthetic_problems("visual", 40, seed=7, difficulty=0.9)
    assert all(e.metadata["template"] == h.metadata["template"] for e, h in zip(easy, hard, strict=True))
    assert all(x != y for x, y in zip(_digests(easy), _digests(hard), strict=True))

    def shapes(p):
        return sum(
            _count_from_pixels(p.images[0], c, s) for c in COLOURS for s in ("circle", "square", "triangle")
        )

    counts = [
        (shapes(e), shapes(h))
        for e, h in zip(easy, hard, strict=True)
        if e.metadata["template"] == "count_shapes"
    ]
    assert np.mean([h for _, h in counts]) > np.mean([e for e, _ in counts]) + 3
    corner = [
        (np.asarray(e.images[0])[:4, :4].std(), np.asarray(h.images[0])[:4, :4].std())
        for e, h in zip(easy, hard, strict=True)
    ]
    assert np.mean([h for _, h in corner]) > np.mean([e for e, _ in corner])  # more pixel noise


def test_paraphrase_views_keep_id_answer_and_image():
    p = synthetic_problems("visual", 1, seed=0)[0]
    views = [paraphrase(p, v) for v in range(3)]
    assert len({v.question for v in views}) == 3
    assert all(v.id == p.id and v.answer == p.answer and v.images == p.images for v in views)
    assert paraphrase(p, 3).question == p.question


def test_round_trip_through_dicts_and_jsonl(tmp_path):
    problems = synthetic_problems("visual", 6, seed=0)
    rows = [p.to_dict(tmp_path / "images") for p in problems]
    back = [Problem.from_dict(json.loads(json.dumps(row))) for row in rows]
    assert _digests(back) == _digests(problems)
    assert [(b.id, b.question, b.answer, b.choices) for b in back] == [
        (p.id, p.question, p.answer, p.choices) for p in problems
    ]
    for row in rows:  # relative to the JSONL file, as a hand-written file would have them
        row["images"] = [str(tmp_path.joinpath(path).relative_to(tmp_path)) for path in row["images"]]
    local = tmp_path / "problems.jsonl"
    local.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert _digests(load_dataset("jsonl", path=local)) == _digests(problems)


def test_local_jsonl_missing_image_fails_at_load(tmp_path):
    local = tmp_path / "problems.jsonl"
    row = {
        "id": "p1",
        "question": "How many circles?",
        "answer": "2",
        "kind": "numeric",
        "images": ["figs/a.png"],
    }
    local.write_text(json.dumps(row) + "\n")
    with pytest.raises(ImageError, match=r"figs/a\.png"):
        load_dataset("jsonl", path=local)
    row["images"] = ["sha256:" + "0" * 64]  # logged without an image folder: no pixels on disk
    local.write_text(json.dumps(row) + "\n")
    with pytest.raises(ImageError, match="content hash"):
        load_dataset("jsonl", path=local)


# --- visual benchmarks on parquet fixtures in the hub schema ----------------------------------


def _figure(k: int) -> Image.Image:
    image = Image.new("RGB", (48, 40), "white")
    ImageDraw.Draw(image).rectangle((4, 4, 8 + 6 * k, 30), fill=(40, 80, 220))
    return image


def _mathvista_row(pid, question, answer, choices=None, answer_type="integer", precision=None):
    return {
        "pid": pid,
        "question": question,
        "image": f"images/{pid}.jpg",
        "decoded_image": _figure(int(pid)),
        "choices": choices,
        "unit": None,
        "precision": precision,
        "answer": answer,
        "question_type": "multi_choice" if choices else "free_form",
        "answer_type": answer_type,
        "metadata": {
            "category": "math-targeted-vqa",
            "context": "bar chart",
            "grade": "daily life",
            "img_height": 40,
            "img_width": 48,
            "language": "english",
            "skills": ["statistical reasoning"],
            "source": "FigureQA",
            "split": "testmini",
            "task": "figure question answering",
        },
        "query": f"Hint: ...\nQuestion: {question}",
    }


def _mathverse_row(index, question, answer, question_type, version="Text Dominant"):
    return {
        "sample_index": index,
        "problem_index": index,
        "problem_version": version,
        "question": question,
        "image": _figure(int(index)),
        "answer": answer,
        "question_type": question_type,
        "metadata": {
            "split": "testmini",
            "source": "GeoQA",
            "subject": "Plane Geometry",
            "subfield": "Length",
        },
        "query_wo": "According to the question shown in the image, please directly answer the question and "
        "provide the correct option letter, e.g., A, B, C, D.",
        "query_cot": "According to the question shown in the image, please first conduct reasoning.",
        "question_for_eval": question,
    }


def _mathvision_row(index, question, answer, options):
    return {
        "id": index,
        "question": question,
        "options": options,
        "image": f"images/{index}.jpg",
        "decoded_image": _figure(int(index)),
        "answer": answer,
        "solution": None,
        "level": 2,
        "subject": "metric geometry - length",
    }


def _wemath_row(key, number, option, answer):
    return {
        "ID": "7",
        "split": "testmini",
        "knowledge concept": "Pythagorean Theorem",
        "question": "The legs of the triangle in the figure are 6 and 8. How long is the hypotenuse?",
        "option": option,
        "answer": answer,
        "image_path": _figure(number),
        "key": key,
        "question number": number,
        "knowledge concept description": "a^2 + b^2 = c^2",
    }


HUB_ROWS = {
    "mathvista": [
        _mathvista_row("1", "How many bars are there?", "1"),
        _mathvista_row(
            "2", "Which bar is the widest?", "the blue one", ["the red one", "the blue one"], "text"
        ),
        _mathvista_row("3", "How wide is the bar (cm)?", "1.25", answer_type="float", precision=2.0),
        _mathvista_row(
            "4", "Which colour?", "green", ["red", "blue"], "text"
        ),  # answer in no option: dropped
    ],
    "mathverse": [
        _mathverse_row(
            "1", "As shown in the figure, AB = 3. Find BC.\nChoices:\nA:3\nB:4\nC:5\nD:6", "C", "multi-choice"
        ),
        _mathverse_row("2", "As shown in the figure, find the area.", "12", "free-form"),
        _mathverse_row("3", "", "B", "multi-choice", "Vision Only"),  # question and options in the figure
        _mathverse_row("4", "Is AB longer than BC?\nChoices:\nA:Yes\nB:No", "No", "multi-choice"),
    ],
    "mathvision": [
        _mathvision_row("1", "<image1>\nWhich figure is next?", "D", ["A", "B", "C", "D", "E"]),
        _mathvision_row("2", "<image1>\nHow long is the path?", "14", []),
        _mathvision_row(
            "3", "<image1>\nWhich is largest?", "2", ["$1$", "$2$", "$3$"]
        ),  # not a letter: dropped
    ],
    "wemath": [
        _wemath_row("2steps_1", 1, "A. 36; B. 64; C. 100; D. No correct answer", "A"),
        _wemath_row("2steps_multi", 3, "A. 12; B. 10; C. 14; D. No correct answer", "B"),
    ],
}
EXPECTED = {  # name -> (id, kind, answer, choices) of each kept row
    "mathvista": [
        ("mathvista-1", "numeric", "1", ()),
        ("mathvista-2", "multiple_choice", "B", ("the red one", "the blue one")),
        ("mathvista-3", "numeric", "1.25", ()),
    ],
    "mathverse": [
        ("mathverse-1", "multiple_choice", "C", ("3", "4", "5", "6")),
        ("mathverse-2", "math", "12", ()),
        ("mathverse-3", "multiple_choice", "B", ()),
        ("mathverse-4", "multiple_choice", "B", ("Yes", "No")),
    ],
    "mathvision": [
        ("mathvision-1", "multiple_choice", "D", ("A", "B", "C", "D", "E")),
        ("mathvision-2", "math", "14", ()),
    ],
    "wemath": [
        ("wemath-7-2steps_1", "multiple_choice", "A", ("36", "64", "100", "No correct answer")),
        ("wemath-7-2steps_multi", "multiple_choice", "B", ("12", "10", "14", "No correct answer")),
    ],
}


@pytest.mark.parametrize("name", sorted(HUB_ROWS))
def test_visual_loader_reads_hub_parquet(name, tmp_path):
    import datasets

    path = tmp_path / f"{name}.parquet"
    datasets.Dataset.from_list(HUB_ROWS[name]).to_parquet(str(path))
    problems = load_dataset(name, path=path)
    assert [(p.id, p.kind, p.answer, p.choices) for p in problems] == EXPECTED[name]
    by_id = {p.id: p for p in problems}
    for p in problems:  # each row's figure is _figure(its index), decoded from the Image column
        number = p.metadata["question_number"] if name == "wemath" else int(p.id.split("-")[1])
        assert isinstance(p.images[0], Image.Image) and p.source == name
        assert image_digest(p.images[0]) == image_digest(_figure(number))
    if name == "mathverse":
        assert by_id["mathverse-3"].question.startswith("According to the question shown in the image")
        assert by_id["mathverse-1"].question == "As shown in the figure, AB = 3. Find BC."
    if name == "mathvista":
        assert "2 decimal place" in by_id["mathvista-3"].question
    if name == "wemath":
        assert {p.metadata["group"] for p in problems} == {"7"}


@pytest.mark.parametrize("name", sorted(VISUAL_DATASETS))
def test_visual_loader_offline_without_cache_raises_clear_error(name, tmp_path, monkeypatch):
    import datasets.config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets", raising=False)
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset(name)
    message = str(info.value)
    assert name in message and VISUAL_DATASETS[name] in message and "path=" in message
