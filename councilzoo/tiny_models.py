"""Tiny random models, built offline: a local BPE tokenizer + random-init Qwen3, Llama or Gemma3
(``build_tiny_model``), a tiny image-text-to-text model (``build_tiny_vlm``), and the cached one
per family that configs name as ``councilzoo-tiny:<family>`` (``tiny_model_path``).

The one home of the tiny models, at the bottom of the package (it imports only
``councilzoo.config``): the test kit (``councilzoo.testing`` re-exports the builders), the
generators' model lookup, the cohort's warmed-up members (``councilzoo.tiny_members``) and the
reproductions' trained tiny LMs (``councilzoo.repro.tiny_lms``) all build from here.

``build_tiny_model(path)`` needs no hub access and takes about a second. The model is random, so
it says nothing sensible, but it exercises every real code path (chat template, tokenisation,
generation, log-probs, training, vLLM's CPU backend: head_dim 32 and untied embeddings).
We use Qwen3/Llama configs, never Qwen2: with a Qwen2 config ``AutoTokenizer`` swaps in
``Qwen2Tokenizer`` and the token ids change. Gemma3 (its text model, ``Gemma3ForCausalLM``) is there
for stand-ins of Gemma-3-270M where its wheels cannot go (the GPU check's cross-family bundle).

Two tiny VLM families, ``build_tiny_vlm(path, family=...)``: Qwen2.5-VL and Idefics3 (SmolVLM's
architecture). Qwen2.5-VL's processor holds a video processor, which transformers builds only with
torchvision (the ``vision`` extra). vLLM's CPU build cannot run it (its Qwen2-VL module imports
torchvision, which breaks that build), so the vLLM tier uses Idefics3, the one chat VLM family
vLLM's CPU build runs (docs/generators.md, "Images").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = [
    "EOS", "FAMILIES", "CHAT_TEMPLATE", "tiny_tokenizer_corpus", "build_tiny_model", "VLM_FAMILIES",
    "IMAGE_TOKEN", "IMAGE_PLACEHOLDERS", "VLM_CHAT_TEMPLATE", "build_tiny_vlm", "TINY_PREFIX",
    "tiny_builder", "tiny_model_path",
]

FAMILIES = ("qwen3", "llama", "gemma3")
_BOS = "<|bos|>"
EOS = "<|im_end|>"  # one assignment per name, so the API reference documents EOS
_PAD = "<|pad|>"
_DEFAULT_VOCAB_SIZE = 512
_SPECIAL_TOKENS = (_PAD, _BOS, EOS, "<|im_start|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_ARGS_FILE = "councilzoo_tiny.json"
_WORDS = (
    "system user assistant proposer reviewer anchor peer verdict RIGHT WRONG KEEP REFRESH SKIP "
    "SPEAK ACCEPT VERIFY ESCALATE answer question solution final the is a of and to step review "
    "agree disagree correct incorrect because so therefore Answer: Verdict: Final answer: "
    "multiple choice option (A) (B) (C) (D) apples books coins has gets gives away times how many "
    "compute remainder modulo fraction plus minus \\boxed{ } \\frac{ }{ } $ + - * / = ."
).split()


def tiny_tokenizer_corpus(seed: int = 0, n_lines: int = 2_000) -> list[str]:
    """Synthetic training text: arithmetic, the role prompts' vocabulary, \\boxed{}, verdicts."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n_lines):
        a, b = (int(x) for x in rng.integers(0, 1000, size=2))
        words = " ".join(rng.choice(_WORDS, size=int(rng.integers(4, 12))))
        lines.append(f"{words} {a} + {b} = {a + b}. The answer is \\boxed{{{a + b}}}. Verdict: RIGHT")
    lines.append(" ".join(str(d) for d in range(10)) + " " + " ".join(_WORDS))
    return lines


def _filler_corpus(n_words: int, seed: int = 0) -> list[str]:
    """Seeded random lowercase pseudo-words, 16 a line: the role corpus alone saturates near 3k
    BPE tokens, and benchmarks want realistic vocabularies (e.g. 32k)."""
    rng = np.random.default_rng([seed, 1])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(n_words)]
    return [" ".join(words[i : i + 16]) for i in range(0, n_words, 16)]


def _build_tokenizer(vocab_size: int, seed: int, extra_special: tuple[str, ...] = ()):
    """The BPE tokenizer; ``extra_special`` tokens get ids after the trained vocabulary, so the
    text model's ids do not move when a VLM adds its image tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = tiny_tokenizer_corpus(seed)
    if vocab_size > _DEFAULT_VOCAB_SIZE:  # the default build's corpus stays as it always was
        corpus += _filler_corpus(vocab_size, seed)
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=_BOS, eos_token=EOS, pad_token=_PAD, padding_side="left"
    )
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", *extra_special]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _language_model(tokenizer, hidden_size: int, num_layers: int, num_heads: int) -> dict:
    """The language model's settings that every tiny model shares (a text model's config, a VLM's
    text config): sizes, untied embeddings, the tokenizer's vocabulary and special ids."""
    return dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _build_config(family: str, tokenizer, hidden_size: int, num_layers: int, num_heads: int, head_dim: int):
    from transformers import Gemma3TextConfig, LlamaConfig, Qwen3Config

    common = _language_model(tokenizer, hidden_size, num_layers, num_heads) | {"head_dim": head_dim}
    return {"qwen3": Qwen3Config, "llama": LlamaConfig, "gemma3": Gemma3TextConfig}[family](**common)


def build_tiny_model(
    path: str | Path,
    *,
    family: str = "qwen3",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    head_dim: int = 32,
    vocab_size: int = _DEFAULT_VOCAB_SIZE,
    seed: int = 0,
) -> Path:
    """Write a tiny random causal LM and its tokenizer to ``path``; return ``path``.

    Loadable with ``AutoTokenizer``/``AutoModelForCausalLM`` (safetensors, ChatML-style chat
    template, eos ``<|im_end|>``, left padding). The arguments are stored beside the model in
    ``councilzoo_tiny.json``; if ``path`` already holds a model built with the same arguments
    it is returned without rebuilding. ``vocab_size`` is the BPE target (byte alphabet included);
    above the default, pseudo-words join the tokenizer corpus so that targets like 32000 are met.
    """
    args = dict(locals())  # first statement: exactly the arguments, recorded beside the model (not path)
    del args["path"]
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if min(hidden_size, num_layers, num_heads, head_dim) < 1 or vocab_size < 300:
        raise ValueError("sizes must be positive and vocab_size >= 300 (256 bytes + specials + merges)")
    path = Path(path)
    if _is_built(path, args):
        return path

    from transformers import AutoModelForCausalLM

    tokenizer = _build_tokenizer(vocab_size, seed)
    config = _build_config(family, tokenizer, hidden_size, num_layers, num_heads, head_dim)
    return _save_random_model(path, args, AutoModelForCausalLM, config, tokenizer, tokenizer, seed)


def _save_random_model(path: Path, args: dict, auto_class, config, processing, tokenizer, seed: int) -> Path:
    """Initialise ``auto_class`` from ``config`` with ``seed`` and save it with ``processing``
    (its tokenizer or processor); the arguments file is written last, marking a complete build."""
    import torch

    with torch.random.fork_rng(devices=[]):  # from_config draws from the global generator
        torch.manual_seed(seed)
        model = auto_class.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path.mkdir(parents=True, exist_ok=True)
    processing.save_pretrained(path)
    model.save_pretrained(path, safe_serialization=True)
    _mark_built(path, args)
    return path


def _is_built(path: Path, args: dict) -> bool:
    args_file = path / _ARGS_FILE
    return args_file.exists() and json.loads(args_file.read_text()) == args


def _mark_built(path: Path, args: dict) -> None:
    (path / _ARGS_FILE).write_text(json.dumps(args, indent=1))  # written last: marks a complete build


VLM_FAMILIES = ("qwen2_5_vl", "idefics3")
IMAGE_TOKEN = "<image>"
_IDEFICS3_TOKENS = ("<fake_token_around_image>", IMAGE_TOKEN, "<end_of_utterance>", "<global-img>")
_IDEFICS3_SCALE = 2  # pixel-shuffle factor: scale**2 vision patches become one image token
_QWEN_VL_TOKENS = ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>")
_QWEN_VL_MERGE = 2  # spatial merge: 2 x 2 vision patches become one image token
IMAGE_PLACEHOLDERS = {"idefics3": IMAGE_TOKEN, "qwen2_5_vl": "<|vision_start|><|image_pad|><|vision_end|>"}


def _vlm_chat_template(placeholder: str) -> str:
    """ChatML as for the text models; a content-part list renders its image parts as the family's
    ``placeholder``, which the processor (or vLLM) expands into the image's tokens."""
    return (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '" + placeholder + "' }}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}"
        "{{ '<|im_end|>' + '\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )


VLM_CHAT_TEMPLATE = _vlm_chat_template(IMAGE_TOKEN)  # Idefics3's


def build_tiny_vlm(
    path: str | Path,
    *,
    family: str = "idefics3",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    head_dim: int = 32,
    image_size: int = 32,
    patch_size: int = 8,
    seed: int = 0,
) -> Path:
    """Write a tiny random image-text-to-text model and its processor to ``path``; return ``path``.

    Loadable with ``AutoProcessor``/``AutoModelForImageTextToText``: the tokenizer of
    ``build_tiny_model`` plus the family's image tokens (appended, so text ids do not move),
    a ChatML template that renders image parts as the family's placeholder, a vision tower of
    ``(image_size / patch_size)**2`` patches, an LM with untied embeddings, and a PIL image
    processor that resizes every image to ``image_size`` square (Qwen2.5-VL: to that many pixels,
    keeping the aspect ratio), so each image costs at most ``(image_size // patch_size)**2 // 4``
    image tokens (4 by default).

    - ``idefics3``: SigLIP-style tower, pixel shuffle by 2, Llama LM, no tiling (vLLM's CPU
      build runs it).
    - ``qwen2_5_vl``: Qwen2.5-VL's windowed tower with 2 x 2 patch merging and M-RoPE (needs
      torchvision for its processor).

    Cached like ``build_tiny_model``.
    """
    args = dict(locals())  # first statement: exactly the arguments, recorded beside the model (not path)
    del args["path"]
    if family not in VLM_FAMILIES:
        raise ValueError(f"family must be one of {VLM_FAMILIES}, got {family!r}")
    grid = image_size // patch_size if patch_size > 0 else 0
    if min(hidden_size, num_layers, num_heads, head_dim, grid) < 1 or grid * patch_size != image_size:
        raise ValueError("sizes must be positive and image_size a multiple of patch_size")
    if grid % 2:
        raise ValueError("image_size // patch_size must be even (2 x 2 patches make one image token)")
    path = Path(path)
    if _is_built(path, args):
        return path

    from transformers import AutoModelForImageTextToText

    build = _qwen2_5_vl if family == "qwen2_5_vl" else _idefics3
    config, processor = build(hidden_size, num_layers, num_heads, head_dim, image_size, patch_size, seed)
    return _save_random_model(
        path, args, AutoModelForImageTextToText, config, processor, processor.tokenizer, seed
    )


def _idefics3(hidden_size, num_layers, num_heads, head_dim, image_size, patch_size, seed):
    from transformers import Idefics3Config, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tokenizer = _build_tokenizer(_DEFAULT_VOCAB_SIZE, seed, extra_special=_IDEFICS3_TOKENS)
    tokenizer.chat_template = VLM_CHAT_TEMPLATE
    text = _build_config("llama", tokenizer, hidden_size, num_layers, num_heads, head_dim)
    vision = dict(
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        image_size=image_size,
        patch_size=patch_size,
    )
    config = Idefics3Config(
        vision_config=vision,
        text_config=text.to_dict(),
        scale_factor=_IDEFICS3_SCALE,
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        tie_word_embeddings=False,
    )
    edge = {"longest_edge": image_size}
    processor = Idefics3Processor(
        image_processor=Idefics3ImageProcessorPil(do_image_splitting=False, size=edge, max_image_size=edge),
        tokenizer=tokenizer,
        chat_template=VLM_CHAT_TEMPLATE,
        image_seq_len=(image_size // patch_size) ** 2 // _IDEFICS3_SCALE**2,
    )
    return config, processor


def _qwen2_5_vl(hidden_size, num_layers, num_heads, head_dim, image_size, patch_size, seed):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLProcessor, Qwen2VLVideoProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    template = _vlm_chat_template(IMAGE_PLACEHOLDERS["qwen2_5_vl"])
    tokenizer = _build_tokenizer(_DEFAULT_VOCAB_SIZE, seed, extra_special=_QWEN_VL_TOKENS)
    tokenizer.chat_template = template
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in _QWEN_VL_TOKENS}
    half = head_dim // 2  # M-RoPE splits each head's rotary frequencies over (time, height, width)
    mrope = [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]
    text = _language_model(tokenizer, hidden_size, num_layers, num_heads) | {
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope}
    }
    vision = dict(
        depth=num_layers,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_heads=num_heads,
        out_hidden_size=hidden_size,
        patch_size=patch_size,
        spatial_merge_size=_QWEN_VL_MERGE,
        temporal_patch_size=2,
        window_size=2 * patch_size * _QWEN_VL_MERGE,
        fullatt_block_indexes=[num_layers - 1],
    )
    config = Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    pixels = image_size * image_size  # min = max: every image is resized to image_size square
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch_size, merge_size=_QWEN_VL_MERGE, min_pixels=pixels, max_pixels=pixels
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(patch_size=patch_size, merge_size=_QWEN_VL_MERGE),
        chat_template=template,
    )
    return config, processor


TINY_PREFIX = "councilzoo-tiny:"


def tiny_builder(family: str):
    """``build_tiny_model`` for a text family, ``build_tiny_vlm`` for a vision-language one."""
    if family in FAMILIES:
        return build_tiny_model
    if family not in VLM_FAMILIES:
        raise ValueError(f"tiny model family must be one of {FAMILIES + VLM_FAMILIES}, got {family!r}")
    return build_tiny_vlm


def tiny_model_path(family: str) -> Path:
    """The offline tiny random model of ``family``, built once under
    ``$COUNCILZOO_CACHE/tiny_models`` (default ``~/.cache/councilzoo``): what demos and CI
    configs name as ``councilzoo-tiny:<family>`` so that they run on a fresh clone."""
    from councilzoo.config import cache_home

    return tiny_builder(family)(cache_home() / "tiny_models" / family, family=family)
