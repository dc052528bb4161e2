"""Generation with a transformers model held in this process (CPU or GPU).

The learner trains ``TransformersGenerator.model`` in place and generates again with it, so this
backend is the reference for on-policy sampling: its log-probabilities are exactly those of the
distribution the tokens were drawn from. Decoding is ``model.generate`` on left-padded batches;
we only add a last logits processor that reads off the sampled tokens' log-probabilities.

Vision-language models (a config with a ``vision_config``) load as ``AutoModelForImageTextToText``
with their ``AutoProcessor``: prompts with image parts are rendered by the processor's chat
template and encoded with their images batch by batch, so a row's ``prompt_token_ids`` hold the
expanded image placeholder tokens the model saw.
"""

from __future__ import annotations

import os
from dataclasses import replace

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    DynamicCache,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)

from councilzoo.agents.base import Completion, Sampling
from councilzoo.agents.generators.chat_template import apply_chat_template, render_prompt
from councilzoo.agents.generators.checks import check_request
from councilzoo.agents.generators.images import message_images
from councilzoo.agents.generators.model_lookup import is_vision_language, resolve_model_path
from councilzoo.agents.generators.sampling import first_stop

__all__ = ["TransformersGenerator"]

# Values that switch off the processors transformers would otherwise add from the model's own
# generation_config (Qwen ships temperature 0.7, top_k 20, repetition_penalty 1.05): decoding
# follows ``Sampling`` exactly, as in the vLLM and OpenAI backends. Temperature and top-p are
# applied by our own processors, ahead of the log-probability recorder.
_NEUTRAL_GREEDY = dict(repetition_penalty=1.0)
_NEUTRAL_SAMPLING = dict(_NEUTRAL_GREEDY, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, typical_p=1.0)


class _SampledLogprobs(LogitsProcessor):
    """Last processor in the chain: keeps the log-softmax of the final scores (after temperature
    and top-p) and, when the next step shows which token was drawn, records its log-probability.
    Holds one (batch, vocab) row at a time instead of every step's scores."""

    def __init__(self) -> None:
        self._last: torch.Tensor | None = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._last is not None:
            self._steps.append(self._last.gather(1, input_ids[:, -1:]).squeeze(1))
        self._last = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """(batch, steps) log-probabilities of ``new_tokens``, the generated part of the sequences."""
        steps = self._steps
        if self._last is not None:
            steps = steps + [self._last.gather(1, new_tokens[:, len(steps)].unsqueeze(1)).squeeze(1)]
        return torch.stack(steps, dim=1)


def _resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype | str:
    if dtype is None:  # float32 on CPU (bf16 matmuls are slow there), the checkpoint's dtype on GPU
        return torch.float32 if device.type == "cpu" else "auto"
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"dtype must be a torch dtype, its name ('bfloat16', ...) or 'auto', got {dtype!r}")
    return resolved


class TransformersGenerator:
    """A ``Generator`` over a transformers causal LM or vision-language model.

    - ``model_or_path``: a local model directory, a cached hub name, or a loaded model with
      ``generate`` (a ``PreTrainedModel`` or a peft ``PeftModel``; then ``tokenizer`` is
      required, or ``processor`` for a vision-language model). ``.model``, ``.tokenizer`` and
      ``.processor`` (None for text models) are public: a learner may update ``.model`` in place
      and the next ``generate`` uses it. ``accepts_images`` is True when there is a processor.
    - ``device``: default CUDA when available, else CPU (a loaded model stays where it is).
    - ``dtype``: default float32 on CPU, the checkpoint's dtype on GPU.
    - ``batch_size``: sequences per ``model.generate`` call; ``n`` samples of a prompt are
      repeated rows of the batch. ``seed`` seeds the stream used when ``Sampling.seed`` is None.
    - ``share_prompts``: a text model reads each prompt once for its ``n`` samples (one forward
      pass over the distinct prompts fills the KV cache, which is repeated ``n`` times before
      decoding) instead of once per sample. The prompt's cost then falls ``n``-fold: about 2-3x
      faster sampling at n = 8 on CPU, where reading the prompt costs more than decoding 32 tokens.
      The samples equal the unshared ones up to float rounding (the cache is computed over a batch
      of another shape), so it is off by default, for callers that compare samples across paths.

    Contract of each ``Completion``: ``token_ids`` are the sampled tokens, ending with the eos
    token when the model stopped by itself, or with the token that completed a stop string
    (``text`` is cut before the stop string, as vLLM and OpenAI do, and omits a trailing
    incomplete UTF-8 character); ``logprobs[i]`` is the
    log-probability of ``token_ids[i]`` under the distribution it was drawn from, i.e. after
    temperature and top-p (greedy: the plain softmax); ``finish_reason`` is "length" when
    ``max_new_tokens`` ran out first. Sampling uses the global torch RNG (``generate`` has no
    generator argument) inside ``torch.random.fork_rng`` seeded from ``Sampling.seed``, so the
    same seed and inputs give the same samples and the caller's RNG state is left untouched.
    """

    def __init__(
        self,
        model_or_path: str | os.PathLike | PreTrainedModel | torch.nn.Module,
        *,
        tokenizer=None,
        processor=None,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        batch_size: int = 64,
        seed: int = 0,
        share_prompts: bool = False,
    ):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.processor = processor
        if isinstance(model_or_path, (str, os.PathLike)):
            target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
            path = resolve_model_path(model_or_path)
            loader = AutoModelForCausalLM
            if is_vision_language(AutoConfig.from_pretrained(path)):
                loader = AutoModelForImageTextToText
                self.processor = processor if processor is not None else AutoProcessor.from_pretrained(path)
                tokenizer = self.processor.tokenizer
            self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
            self.model = loader.from_pretrained(path, dtype=_resolve_dtype(dtype, target))
            self.model.to(target)
        elif isinstance(model_or_path, torch.nn.Module) and hasattr(model_or_path, "generate"):
            tokenizer = tokenizer if tokenizer is not None or processor is None else processor.tokenizer
            if tokenizer is None:
                raise ValueError("tokenizer (or processor) is required when model_or_path is a loaded model")
            self.model, self.tokenizer = model_or_path, tokenizer
            if device is not None:
                self.model.to(device)
            if dtype is not None:
                self.model.to(_resolve_dtype(dtype, self.model.device))
        else:
            raise TypeError(
                "model_or_path must be a model directory, a hub name or a loaded causal LM, "
                f"got {type(model_or_path).__name__}"
            )
        self.batch_size = batch_size
        self.share_prompts = share_prompts
        self._seeds = torch.Generator().manual_seed(seed)
        self._eos_ids = self._eos_token_ids()
        pad = self.tokenizer.pad_token_id
        self._pad_id = pad if pad is not None else self._eos_ids[0]

    def _eos_token_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        if not ids:
            raise ValueError("the model and tokenizer define no eos token; set tokenizer.eos_token")
        return ids

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def accepts_images(self) -> bool:
        return self.processor is not None

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None, seeds: list[int] | None = None
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in prompt order (see the class docstring for the contract).
        ``seeds``: one seed per prompt, each prompt then sampled by a call of its own with that seed
        (its samples depend on nothing else), instead of ``Sampling.seed`` for the whole call."""
        sampling = check_request(prompts, n, sampling)
        if seeds is not None:
            if len(seeds) != len(prompts):
                raise ValueError(f"seeds must hold one seed per prompt, got {len(seeds)} for {len(prompts)}")
            pairs = zip(prompts, seeds, strict=True)
            return [self.generate([p], n, replace(sampling, seed=s))[0] for p, s in pairs]
        if self.processor is None:
            encoded = [render_prompt(self.tokenizer, p) for p in prompts]
        else:  # images are opened (and checked) before any decoding starts
            encoded = [(p, message_images(p)) for p in prompts]
        copies = 1 if sampling.greedy else n  # greedy samples are identical: decode once, copy
        shared = copies if self.share_prompts and self.processor is None else 1
        # batches of whole prompts when they share: each batch reads its distinct prompts once
        per_batch = max(1, self.batch_size // shared)
        rows = [row for row in encoded for _ in range(copies // shared)]
        seed = sampling.seed
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,), generator=self._seeds))
        device = self.device
        completions: list[Completion] = []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seed)
                for start in range(0, len(rows), per_batch):
                    completions += self._generate_batch(rows[start : start + per_batch], sampling, shared)
        finally:
            self.model.train(was_training)
        grouped = [completions[i * copies : (i + 1) * copies] for i in range(len(prompts))]
        return [group if copies == n else [replace(group[0]) for _ in range(n)] for group in grouped]

    def _on_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """An input on the model's device; pixel values also in the model's dtype (bf16 on GPU)."""
        if tensor.is_floating_point():
            return tensor.to(self.device, dtype=self.model.dtype)
        return tensor.to(self.device)

    def _encode_batch(self, rows: list) -> tuple[dict[str, torch.Tensor], list[list[int]]]:
        """Left-padded model inputs for a batch of rows, and each row's own prompt token ids."""
        if self.processor is None:
            width = max(len(r) for r in rows)
            input_ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long)
            attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, r in enumerate(rows):  # left padding: every prompt ends at the last column
                input_ids[i, width - len(r) :] = torch.tensor(r)
                attention_mask[i, width - len(r) :] = 1
            return {"input_ids": input_ids, "attention_mask": attention_mask}, rows
        texts = [
            p if isinstance(p, str) else apply_chat_template(self.processor, p)
            for p, _ in rows
        ]
        images = [imgs for _, imgs in rows]
        inputs = self.processor(
            text=texts, images=images if any(images) else None, padding=True, padding_side="left",
            return_tensors="pt",
        )
        pairs = zip(inputs["input_ids"], inputs["attention_mask"], strict=True)
        return dict(inputs), [row[mask.bool()].tolist() for row, mask in pairs]

    @torch.inference_mode()
    def _generate_batch(self, rows: list, sampling: Sampling, copies: int = 1) -> list[Completion]:
        """One ``generate`` call; ``copies`` > 1: each row is a distinct prompt, read once and
        decoded ``copies`` times (``share_prompts``)."""
        inputs, prompt_ids = self._encode_batch(rows)
        width = inputs["input_ids"].shape[1]
        inputs = {k: self._on_device(v) for k, v in inputs.items()}
        if copies > 1:
            inputs["cache"] = self._prompt_cache(inputs, copies)
            inputs["input_ids"] = inputs["input_ids"].repeat_interleave(copies, dim=0)
            inputs["attention_mask"] = inputs["attention_mask"].repeat_interleave(copies, dim=0)
            prompt_ids = [ids for ids in prompt_ids for _ in range(copies)]
        recorder = _SampledLogprobs()
        processors = LogitsProcessorList()
        if not sampling.greedy:
            if sampling.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(sampling.temperature))
            if sampling.top_p < 1.0:
                processors.append(TopPLogitsWarper(sampling.top_p))
        processors.append(recorder)
        config = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not sampling.greedy,
            eos_token_id=self._eos_ids,
            pad_token_id=self._pad_id,
            stop_strings=list(sampling.stop) or None,
            **(_NEUTRAL_GREEDY if sampling.greedy else _NEUTRAL_SAMPLING),
        )
        sequences = self._model_generate(
            **inputs,
            generation_config=config,
            logits_processor=processors,
            tokenizer=self.tokenizer if sampling.stop else None,
        )
        new_tokens = sequences[:, width:]
        logprobs = recorder.finish(new_tokens).cpu().tolist()
        return [
            self._completion(prompt, tokens, lps, sampling.stop)
            for prompt, tokens, lps in zip(prompt_ids, new_tokens.cpu().tolist(), logprobs, strict=True)
        ]

    def _prompt_cache(self, inputs: dict[str, torch.Tensor], copies: int) -> DynamicCache:
        """The KV cache of every prompt but its last token (``generate`` reads that one, and needs
        one token to start from), at the positions ``generate`` gives them, repeated ``copies`` times."""
        ids, mask = inputs["input_ids"][:, :-1], inputs["attention_mask"][:, :-1]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
        cache.batch_repeat_interleave(copies)
        return cache

    def _model_generate(self, **kwargs) -> torch.Tensor:
        """``model.generate`` of one batch (``AdapterGenerator`` adds each row's adapter)."""
        return self.model.generate(**kwargs)

    def _completion(self, prompt: list[int], tokens: list[int], logprobs: list[float], stop) -> Completion:
        """Cut one generated row where it ended (eos, stop string, or the length limit)."""
        end = next((i + 1 for i, t in enumerate(tokens) if t in self._eos_ids), None)
        finish = "length" if end is None else "stop"
        tokens = tokens[:end]
        text = self._decode(tokens)
        cut = first_stop(text, stop)
        if cut is not None:
            # rows stopped by a stop string are padded afterwards: keep up to the completing token
            end = _shortest_prefix(tokens, lambda k: first_stop(self._decode(tokens[:k]), stop) is not None)
            tokens, text, finish = tokens[:end], text[:cut], "stop"
        return Completion(
            text=text,
            token_ids=tokens,
            logprobs=logprobs[: len(tokens)],
            prompt_tokens=len(prompt),
            completion_tokens=len(tokens),
            finish_reason=finish,
            prompt_token_ids=list(prompt),
        )

    def _decode(self, tokens: list[int]) -> str:
        # bytes of a character left incomplete at the end decode to U+FFFD: drop them, as vLLM does
        return self.tokenizer.decode(tokens, skip_special_tokens=True).rstrip("\ufffd")


def _shortest_prefix(tokens: list[int], holds) -> int:
    """Smallest k with ``holds(k)``, given ``holds(len(tokens))`` and monotonicity (binary search)."""
    lo, hi = 1, len(tokens)
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
