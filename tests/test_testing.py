"""The offline tiny model: reproducible, loadable by Auto classes, chat template, eos."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList

from councilzoo.testing import CHAT_TEMPLATE, EOS, build_tiny_model

TEXTS = ["The answer is \\boxed{42}.", "Verdict: RIGHT", "  spaces\tand\nnewlines ", "naïve ∑ 日本"]


def _logits(path, text="What is 2 + 3?"):
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    ids = tok(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return ids, model(ids).logits


def test_reload_is_bit_identical(tiny_model_dir):
    ids_a, logits_a = _logits(tiny_model_dir)
    ids_b, logits_b = _logits(tiny_model_dir)
    assert torch.equal(ids_a, ids_b) and torch.equal(logits_a, logits_b)


def test_rebuild_from_scratch_is_identical(tiny_model_dir, tmp_path):
    other = build_tiny_model(tmp_path / "again")
    ids_a, logits_a = _logits(tiny_model_dir)
    ids_b, logits_b = _logits(other)
    assert torch.equal(ids_a, ids_b) and torch.equal(logits_a, logits_b)


def test_cache_returns_existing_build_and_rebuilds_on_new_arguments(tmp_path):
    path = build_tiny_model(tmp_path / "m", num_layers=1)
    weights = path / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert build_tiny_model(path, num_layers=1) == path and weights.stat().st_mtime_ns == stamp
    build_tiny_model(path, num_layers=2)
    assert json.loads((path / "councilzoo_tiny.json").read_text())["num_layers"] == 2
    assert AutoModelForCausalLM.from_pretrained(path).config.num_hidden_layers == 2


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_round_trips_text(tiny_model_dir, text):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tok.decode(tok(text)["input_ids"]) == text
    assert tok.eos_token == EOS and tok.pad_token_id is not None and tok.bos_token_id is not None


def test_chat_template_renders_chatml(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "system", "content": "You are a reviewer."}, {"role": "user", "content": "2+2=4?"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nYou are a reviewer.<|im_end|>\n"
        "<|im_start|>user\n2+2=4?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tok.chat_template == CHAT_TEMPLATE


@pytest.mark.parametrize(
    "family,arch",
    [("qwen3", "Qwen3ForCausalLM"), ("llama", "LlamaForCausalLM"), ("gemma3", "Gemma3ForCausalLM")],
)
def test_families_build_with_untied_head_dim_32(tmp_path, family, arch):
    model = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / family, family=family))
    assert type(model).__name__ == arch
    assert model.config.head_dim == 32 and not model.config.tie_word_embeddings
    assert model.get_input_embeddings().weight.data_ptr() != model.get_output_embeddings().weight.data_ptr()
    assert 1e5 < model.num_parameters() < 2e6


def test_large_vocab_target_is_met_and_round_trips(tmp_path):
    path = build_tiny_model(tmp_path / "big", vocab_size=8000, num_layers=1)
    tok = AutoTokenizer.from_pretrained(path)
    assert len(tok) == 8000 == AutoModelForCausalLM.from_pretrained(path).config.vocab_size
    assert all(tok.decode(tok(text)["input_ids"]) == text for text in TEXTS)


class _ForceEosAfter(LogitsProcessor):
    def __init__(self, prompt_len: int, steps: int, eos: int):
        self.prompt_len, self.steps, self.eos = prompt_len, steps, eos

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] - self.prompt_len >= self.steps:
            scores = torch.full_like(scores, -float("inf"))
            scores[:, self.eos] = 0.0
        return scores


def test_generation_stops_at_eos(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "1+1?"}], tokenize=False, add_generation_prompt=True
    )
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    assert tok.convert_ids_to_tokens(ids[0, :1].tolist()) == ["<|im_start|>"]  # one special token
    forced = LogitsProcessorList([_ForceEosAfter(ids.shape[1], 3, tok.eos_token_id)])
    out = model.generate(ids, max_new_tokens=20, do_sample=False, logits_processor=forced)
    new = out[0, ids.shape[1] :].tolist()
    assert len(new) == 4 and new[-1] == tok.eos_token_id


def test_bad_family_raises(tmp_path):
    with pytest.raises(ValueError, match="family"):
        build_tiny_model(tmp_path, family="qwen2")


# --- the tiny VLM ------------------------------------------------------------------------------


def _image(seed: int, size=(60, 40)):
    import numpy as np
    from PIL import Image

    width, height = size
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def _image_prompt(image, text="What is 2 + 3?", image_first=True):
    parts = [{"type": "image", "image": image}, {"type": "text", "text": text}]
    return [{"role": "user", "content": parts if image_first else parts[::-1]}]


def _vlm_inputs(processor, prompts):
    texts = [processor.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    images = [[part["image"] for m in p for part in m["content"] if part["type"] == "image"] for p in prompts]
    return processor(text=texts, images=images, return_tensors="pt", padding=True)


def _vlm(path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return AutoProcessor.from_pretrained(path), AutoModelForImageTextToText.from_pretrained(path)


def test_vlm_builds_idefics3_with_image_tokens_and_untied_head_dim_32(tiny_vlm_dir):
    from councilzoo.testing import IMAGE_TOKEN, VLM_CHAT_TEMPLATE

    processor, model = _vlm(tiny_vlm_dir)
    assert type(model).__name__ == "Idefics3ForConditionalGeneration"
    assert type(processor).__name__ == "Idefics3Processor"
    assert type(processor.image_processor).__name__.startswith("Idefics3ImageProcessor")
    text = model.config.text_config
    assert text.head_dim == 32 and not model.config.tie_word_embeddings and 1e5 < model.num_parameters() < 2e6
    assert model.config.image_token_id == processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    assert processor.chat_template == VLM_CHAT_TEMPLATE
    prompt = _image_prompt(_image(0))
    rendered = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    assert rendered == "<|im_start|>user\n<image>What is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    ids = _vlm_inputs(processor, [prompt])["input_ids"][0].tolist()
    assert ids.count(model.config.image_token_id) == 4  # (32 / 8)**2 patches, pixel-shuffled by 2


def test_vlm_builds_qwen2_5_vl_with_merged_patches(tmp_path):
    from councilzoo.testing import IMAGE_PLACEHOLDERS, build_tiny_vlm

    processor, model = _vlm(build_tiny_vlm(tmp_path / "q", family="qwen2_5_vl"))
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2_5_VLProcessor"
    assert not model.config.tie_word_embeddings and 1e5 < model.num_parameters() < 2e6
    prompt = _image_prompt(_image(0))
    rendered = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    assert rendered.startswith("<|im_start|>user\n" + IMAGE_PLACEHOLDERS["qwen2_5_vl"] + "What is 2 + 3?")
    ids = _vlm_inputs(processor, [prompt])["input_ids"][0].tolist()
    assert 1 <= ids.count(model.config.image_token_id) <= 4  # aspect ratio kept within 32 x 32 pixels
    square = _vlm_inputs(processor, [_image_prompt(_image(0, (48, 48)))])["input_ids"][0].tolist()
    assert square.count(model.config.image_token_id) == 4  # (32 / 8)**2 patches, merged 2 x 2


def test_vlm_text_tokens_match_the_text_model(tiny_vlm_family_dir, tiny_model_dir):
    """The image tokens are appended after the shared vocabulary, so plain text tokenises alike."""
    processor, _ = _vlm(tiny_vlm_family_dir)
    text_tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert all(processor.tokenizer(t)["input_ids"] == text_tok(t)["input_ids"] for t in TEXTS)


def test_vlm_reload_gives_identical_logits_on_an_image_prompt(tiny_vlm_family_dir):
    results = []
    for _ in range(2):
        processor, model = _vlm(tiny_vlm_family_dir)
        inputs = _vlm_inputs(processor, [_image_prompt(_image(1))])
        with torch.no_grad():
            results.append((inputs, model(**inputs).logits))
    (inputs_a, logits_a), (inputs_b, logits_b) = results
    assert torch.equal(inputs_a["pixel_values"], inputs_b["pixel_values"]) and torch.equal(logits_a, logits_b)


def test_vlm_batched_left_padded_generation_equals_one_prompt_at_a_time(tiny_vlm_family_dir):
    processor, model = _vlm(tiny_vlm_family_dir)
    second = _image_prompt(_image(3, (90, 50)), "how many apples", image_first=False)
    prompts = [_image_prompt(_image(2)), second]
    batch = _vlm_inputs(processor, prompts)
    mask = batch["attention_mask"]
    assert mask[:, -1].all() and not mask[:, 0].all()  # one row padded, on the left
    out = _greedy_new_tokens(model, batch)
    for prompt, row in zip(prompts, out, strict=True):
        assert row == _greedy_new_tokens(model, _vlm_inputs(processor, [prompt]))[0]
    assert out[0] != out[1]


def _greedy_new_tokens(model, inputs, steps=6) -> list[list[int]]:
    out = model.generate(**inputs, max_new_tokens=steps, do_sample=False)
    return out[:, inputs["input_ids"].shape[1] :].tolist()


def test_vlm_cache_returns_existing_build_and_rebuilds_on_new_arguments(tmp_path):
    from councilzoo.testing import build_tiny_vlm

    path = build_tiny_vlm(tmp_path / "v", num_layers=1)
    weights = path / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert build_tiny_vlm(path, num_layers=1) == path and weights.stat().st_mtime_ns == stamp
    build_tiny_vlm(path, num_layers=1, image_size=64)
    processor, model = _vlm(path)
    assert model.config.vision_config.image_size == 64 and processor.image_seq_len == 16


@pytest.mark.parametrize("kwargs", [{"family": "llava"}, {"image_size": 36}, {"image_size": 24}])
def test_vlm_bad_arguments_raise(tmp_path, kwargs):
    from councilzoo.testing import build_tiny_vlm

    with pytest.raises(ValueError):
        build_tiny_vlm(tmp_path, **kwargs)
