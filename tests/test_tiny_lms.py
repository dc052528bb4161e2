"""The SFT'd tiny LMs of the reproductions: task, skills, the shipped weights and their hashes, and
the deterministic fixed-step build that reproduces them."""

from __future__ import annotations

import dataclasses

import pytest

from councilzoo.repro import tiny_lms
from councilzoo.repro.tiny_lms import (
    QUESTION_FORMS,
    REGISTRY,
    SHA256,
    SPLITS,
    TinyLMSpec,
    addition_problems,
    build,
    needs_carry,
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
    with pytest.raises(ValueError, match="regime"):
        TinyLMSpec("qwen3", 64, 2, steps=10, regime=(0.6, 0.4))
    with pytest.raises(ValueError, match="skills"):
        TinyLMSpec("qwen3", 64, 2, steps=10, skills="carries")
    with pytest.raises(ValueError, match="steps"):
        TinyLMSpec("qwen3", 64, 2, steps=0)


def test_skills_split_the_items_by_carry():
    items = addition_problems("test")
    carry = [p for p in items if needs_carry(p)]
    assert 0 < len(carry) < len(items)
    for p in items:
        a, b = (int(x) for x in p.id.split("-")[1:])
        assert needs_carry(p) == ((a % 10 + b % 10) >= 10)
        assert tiny_lms.SKILLS["carry"](p) != tiny_lms.SKILLS["no_carry"](p)


def test_every_shipped_model_matches_its_recorded_hash_and_the_set_stays_small():
    assert set(SHA256) == set(REGISTRY)
    total = 0
    for name, spec in REGISTRY.items():
        path = tiny_lm(name)  # raises on a digest mismatch
        info = tiny_lm_info(path)
        assert info["name"] == name and info["steps"] == spec.steps
        assert info["spec"] == dataclasses.asdict(spec) | {"regime": list(spec.regime)}
        total += sum(f.stat().st_size for f in path.iterdir())
    assert total < 10 * 2**20


def test_a_changed_shipped_file_is_a_clear_error(tmp_path, monkeypatch):
    import shutil

    shutil.copytree(tiny_lms.DATA_DIR / "solver-weak", tmp_path / "solver-weak")
    monkeypatch.setattr(tiny_lms, "DATA_DIR", tmp_path)
    tiny_lm.cache_clear()
    try:
        assert tiny_lm("solver-weak") == tmp_path / "solver-weak"  # an intact copy passes
        tiny_lm.cache_clear()
        with (tmp_path / "solver-weak" / "config.json").open("a") as f:
            f.write(" ")
        with pytest.raises(ValueError, match="sha256"):
            tiny_lm("solver-weak")
    finally:
        tiny_lm.cache_clear()


def test_a_fixed_step_build_is_deterministic_and_continues_its_parent(tmp_path, monkeypatch):
    parent = TinyLMSpec("llama", 32, 1, num_heads=2, steps=4, eval_every=2, eval_items=8, batch_size=8)
    child = TinyLMSpec("llama", 32, 1, num_heads=2, steps=3, eval_every=2, eval_items=8, batch_size=8,
                       task="verifier", skills="carry", init_from="probe-parent", data_seed=7)
    monkeypatch.setitem(REGISTRY, "probe-parent", parent)
    monkeypatch.setitem(REGISTRY, "probe-child", child)
    with pytest.raises(ValueError, match="share"):
        dataclasses.replace(child, hidden_size=64).parent()
    with pytest.raises(ValueError, match="init_from"):
        dataclasses.replace(child, init_from="no-such-model").parent()
    path = build("probe-child", tmp_path / "a")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["probe-child", "probe-parent"]  # parent too
    info = tiny_lm_info(path)
    assert info["steps"] == 3 and [s for s, _ in info["dev_curve"]] == [2]  # no early stop: every step ran
    assert set(info["test_accuracy_by_skill"]) == {"carry", "no_carry"}
    # the same spec on the same machine gives the same bytes (what SHA256 records for the shipped set)
    again = build("probe-child", tmp_path / "b")
    assert tiny_lms.digest(again) == tiny_lms.digest(path)
    parents = [tiny_lms.digest(tmp_path / run / "probe-parent") for run in ("a", "b")]
    assert parents[0] == parents[1]
    import torch
    from safetensors.torch import load_file

    parent_weights = load_file(tmp_path / "a" / "probe-parent" / "model.safetensors")
    child_weights = load_file(path / "model.safetensors")
    assert parent_weights.keys() == child_weights.keys()
    assert all(w.dtype == torch.float16 for w in child_weights.values())  # shipped at half the bytes
    assert any(not torch.equal(parent_weights[k], child_weights[k]) for k in parent_weights)  # trained on
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(path).dtype == torch.float32  # CPUs run it in float32


def test_the_verifier_prompt_shows_both_candidates():
    problem = addition_problems("test", 1)[0]
    text = tiny_lms.verifier_messages(problem, "61", "71")[-1]["content"]
    assert "\\boxed{61}" in text and "\\boxed{71}" in text and problem.question in text


def test_reviewer_target_states_both_sums_then_the_verdict():
    from councilzoo.tasks import extract_verdict

    assert extract_verdict(tiny_lms.reviewer_target("68", "68")) == "RIGHT"
    for wrong in addition_problems("test", 1)[0].metadata["distractors"]:
        text = tiny_lms.reviewer_target("68", wrong)
        assert text.startswith(f"68 vs {wrong}.") and extract_verdict(text) == "WRONG"
