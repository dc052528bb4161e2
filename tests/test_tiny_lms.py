"""The SFT'd tiny LMs of the reproductions: task, cache, and the accuracy band they promise."""

from __future__ import annotations

import dataclasses

import pytest

from councilzoo.repro import tiny_lms
from councilzoo.repro.tiny_lms import (
    QUESTION_FORMS,
    QUICK_STEPS,
    REGISTRY,
    SPLITS,
    TinyLMSpec,
    addition_problems,
    build,
    quick_spec,
    tiny_lm,
    tiny_lm_info,
)
from councilzoo.tasks import answers_equivalent, paraphrase


def test_splits_partition_the_pairs_and_ids_are_stable():
    ids = {name: {p.id for p in addition_problems(name)} for name in SPLITS}
    assert sum(map(len, ids.values())) == (tiny_lms.MAX_OPERAND + 1) ** 2
    assert not ids["sft"] & (ids["dev"] | ids["rl"] | ids["test"])
    assert not ids["test"] & (ids["dev"] | ids["rl"])
    # the seed reorders a split, never changes it; an id names its operands
    assert {p.id for p in addition_problems("test", seed=3)} == ids["test"]
    first = addition_problems("rl", 5, seed=1)
    assert [p.id for p in first] == [p.id for p in addition_problems("rl", 5, seed=1)]
    for p in first:
        a, b = (int(x) for x in p.id.split("-")[1:])
        assert int(p.answer) == a + b and p.question == f"What is {a} + {b}?"


def test_paraphrase_views_keep_id_and_answer():
    for p in addition_problems("sft", 20):
        views = [paraphrase(p, v) for v in range(len(QUESTION_FORMS))]
        assert len({v.question for v in views}) == len(QUESTION_FORMS)
        assert all(v.id == p.id and v.answer == p.answer and v.kind == "numeric" for v in views)
        assert not any(answers_equivalent(d, p.answer, "numeric") for d in p.metadata["distractors"])


def test_bad_input_is_rejected_before_work():
    with pytest.raises(ValueError, match="split"):
        addition_problems("train")
    with pytest.raises(ValueError, match="n must be"):
        addition_problems("test", 10_000)
    with pytest.raises(ValueError, match="unknown tiny LM"):
        tiny_lm("no-such-model")
    with pytest.raises(ValueError, match="band"):
        TinyLMSpec("qwen3", 64, 2, band=(0.6, 0.4))


def test_cache_key_follows_the_spec():
    spec = REGISTRY["solver-qwen-a"]
    assert spec.key() == dataclasses.replace(spec).key()
    assert spec.key() != dataclasses.replace(spec, data_seed=spec.data_seed + 1).key()


@pytest.mark.slow
def test_a_small_build_is_cached_and_reused(tmp_path):
    spec = TinyLMSpec("llama", 32, 1, band=(0.0, 1.0), max_steps=4, eval_every=2, eval_items=8, batch_size=8)
    path = build("probe", spec, cache_dir=tmp_path)
    info = tiny_lm_info(path)
    assert info["steps"] == 2 and info["in_band"]  # band (0, 1): the first evaluation stops it
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp folder left behind
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert build("probe", spec, cache_dir=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not retrained


def test_quick_variant_is_cut_short_and_cached_apart():
    spec = REGISTRY["solver-qwen-a"]
    quick = quick_spec(spec)
    assert quick.max_steps == QUICK_STEPS < spec.max_steps and quick.key() != spec.key()


def test_a_continued_model_starts_from_its_parent_and_tracks_its_key(tmp_path, monkeypatch):
    parent = TinyLMSpec("llama", 32, 1, num_heads=2, band=(0.0, 1.0), max_steps=2, eval_every=2, eval_items=8,
                        batch_size=8)
    monkeypatch.setitem(REGISTRY, "probe-parent", parent)
    child = dataclasses.replace(parent, task="reviewer", init_from="probe-parent", data_seed=7)
    assert child.parent() == parent
    changed = dataclasses.replace(parent, data_seed=1)
    key = child.key()
    monkeypatch.setitem(REGISTRY, "probe-parent", changed)
    assert child.key() != key  # a rebuilt parent invalidates its children
    monkeypatch.setitem(REGISTRY, "probe-parent", parent)
    with pytest.raises(ValueError, match="share"):
        dataclasses.replace(child, hidden_size=64).key()
    with pytest.raises(ValueError, match="init_from"):
        dataclasses.replace(child, init_from="no-such-model").key()
    path = build("probe-child", child, cache_dir=tmp_path)
    names = sorted(p.name.rsplit("-", 1)[0] for p in tmp_path.iterdir())
    assert names == ["probe-child", "probe-parent"]  # the parent was built on the way, into the same cache
    import torch
    from safetensors.torch import load_file

    parent_weights = load_file(tmp_path / f"probe-parent-{parent.key()}" / "model.safetensors")
    child_weights = load_file(path / "model.safetensors")
    assert parent_weights.keys() == child_weights.keys()
    assert any(not torch.equal(parent_weights[k], child_weights[k]) for k in parent_weights)  # trained on


def test_reviewer_target_states_both_sums_then_the_verdict():
    from councilzoo.tasks import extract_verdict

    assert extract_verdict(tiny_lms.reviewer_target("68", "68")) == "RIGHT"
    for wrong in addition_problems("test", 1)[0].metadata["distractors"]:
        text = tiny_lms.reviewer_target("68", wrong)
        assert text.startswith(f"68 vs {wrong}.") and extract_verdict(text) == "WRONG"
