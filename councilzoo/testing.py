"""An offline tiny model for tests and CI: local BPE tokenizer + random-init Qwen3 or Llama.

``build_tiny_model(path)`` needs no hub access and takes about a second. The model is random, so
it says nothing sensible, but it exercises every real code path (chat template, tokenisation,
generation, log-probs, training, vLLM's CPU backend: head_dim 32 and untied embeddings).
We use Qwen3/Llama configs, never Qwen2: with a Qwen2 config ``AutoTokenizer`` swaps in
``Qwen2Tokenizer`` and the token ids change.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FAMILIES = ("qwen3", "llama")
BOS, EOS, PAD = "<|bos|>", "<|im_end|>", "<|pad|>"
DEFAULT_VOCAB_SIZE = 512
SPECIAL_TOKENS = (PAD, BOS, EOS, "<|im_start|>")
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


def filler_corpus(n_words: int, seed: int = 0) -> list[str]:
    """Seeded random lowercase pseudo-words, 16 a line: the role corpus alone saturates near 3k
    BPE tokens, and benchmarks want realistic vocabularies (e.g. 32k)."""
    rng = np.random.default_rng([seed, 1])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(n_words)]
    return [" ".join(words[i : i + 16]) for i in range(0, n_words, 16)]


def _build_tokenizer(vocab_size: int, seed: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = tiny_tokenizer_corpus(seed)
    if vocab_size > DEFAULT_VOCAB_SIZE:  # the default build's corpus stays as it always was
        corpus += filler_corpus(vocab_size, seed)
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, padding_side="left"
    )
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _build_config(family: str, tokenizer, hidden_size: int, num_layers: int, num_heads: int, head_dim: int):
    from transformers import LlamaConfig, Qwen3Config

    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        head_dim=head_dim,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen3Config(**common) if family == "qwen3" else LlamaConfig(**common)


def build_tiny_model(
    path: str | Path,
    *,
    family: str = "qwen3",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    head_dim: int = 32,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    seed: int = 0,
) -> Path:
    """Write a tiny random causal LM and its tokenizer to ``path``; return ``path``.

    Loadable with ``AutoTokenizer``/``AutoModelForCausalLM`` (safetensors, ChatML-style chat
    template, eos ``<|im_end|>``, left padding). The arguments are stored beside the model in
    ``councilzoo_tiny.json``; if ``path`` already holds a model built with the same arguments
    it is returned without rebuilding. ``vocab_size`` is the BPE target (byte alphabet included);
    above the default, pseudo-words join the tokenizer corpus so that targets like 32000 are met.
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if min(hidden_size, num_layers, num_heads, head_dim) < 1 or vocab_size < 300:
        raise ValueError("sizes must be positive and vocab_size >= 300 (256 bytes + specials + merges)")
    path = Path(path)
    args = dict(
        family=family,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        head_dim=head_dim,
        vocab_size=vocab_size,
        seed=seed,
    )
    args_file = path / _ARGS_FILE
    if args_file.exists() and json.loads(args_file.read_text()) == args:
        return path

    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = _build_tokenizer(vocab_size, seed)
    config = _build_config(family, tokenizer, hidden_size, num_layers, num_heads, head_dim)
    with torch.random.fork_rng(devices=[]):  # from_config draws from the global generator
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    model.save_pretrained(path, safe_serialization=True)
    args_file.write_text(json.dumps(args, indent=1))  # written last: marks a complete build
    return path
