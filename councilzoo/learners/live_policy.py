"""Generation with a trainer's current weights, for the paths councilzoo owns inside training:
held-out evaluation, seeded sampling and TRACER's utterances.

When the trainer generates with vLLM, these paths generate where TRL does, after pushing the
trainer's weights there if they changed since the last push (``push_weights``):

- colocated (``trainer: {use_vllm: true, vllm_mode: colocate}``): on TRL's own engine
  (``trainer.vllm_generation.llm``; no second engine holds the model), the push through TRL's
  ``sync_weights`` on CUDA, through vLLM's in-place ``reload_weights`` on a CPU
  (``VLLMGenerator.sync_weights``, LoRA merged for the copy; ``weight_push_path``);
- server (``vllm_mode: server``): on the vLLM server through TRL's own ``VLLMClient``
  (``ServerGenerator``), the push through TRL's ``sync_weights`` (its weight-sync group, NCCL).

Otherwise they generate with transformers on the trainer's model. Every rank of the world enters
``policy_generator`` together: under ZeRO-3 it gathers the sharded parameters, a collective.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from councilzoo.agents.base import Completion, Generator, Sampling
from councilzoo.agents.generators.chat_template import render_prompt
from councilzoo.agents.generators.checks import check_request
from councilzoo.agents.generators.sampling import first_stop, prompt_seeds

__all__ = [
    "vllm_mode", "policy_generator", "trainer_vllm_generator", "push_weights", "weights_pushed",
    "mark_weights_pushed", "ServerGenerator",
]

# Requests in flight at once from one process; the server batches them.
_SERVER_CONCURRENCY = 64


def vllm_mode(args: Any) -> str | None:
    """``"colocate"`` or ``"server"`` when the trainer settings make TRL generate with vLLM, else None."""
    return getattr(args, "vllm_mode", "colocate") if getattr(args, "use_vllm", False) else None


@contextmanager
def policy_generator(trainer: Any) -> Iterator[Generator]:
    """A generator over ``trainer``'s current weights (see the module docstring)."""
    mode = vllm_mode(trainer.args)
    if mode is None:
        from transformers import ProcessorMixin
        from trl.models import unwrap_model_for_generation

        from councilzoo.agents.generators.transformers_backend import TransformersGenerator

        processing = trainer.processing_class
        vlm = isinstance(processing, ProcessorMixin)
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            yield TransformersGenerator(
                model, tokenizer=None if vlm else processing, processor=processing if vlm else None
            )
        return
    generator = trainer_vllm_generator(trainer)
    push_weights(trainer, generator)
    yield generator


def trainer_vllm_generator(trainer: Any) -> Generator:
    """A generator where ``trainer`` generates with vLLM: its colocated engine or its server."""
    if vllm_mode(trainer.args) == "server":
        return ServerGenerator(_server_client(trainer), trainer.processing_class)
    from councilzoo.agents.generators.vllm_backend import VLLMGenerator

    return VLLMGenerator.from_engine(trainer.vllm_generation.llm)


def push_weights(trainer: Any, generator: Any) -> None:
    """Push ``trainer``'s weights to where it generates (``generator``, from ``trainer_vllm_generator``)
    unless that holds this optimizer step's weights already. TRL pushes before each of its own
    generations (and before a ``rollout_func``) when its record differs from the global step, so a
    push here also spares TRL its own. Every rank calls it (TRL's server push gathers parameters)."""
    if weights_pushed(trainer):
        return
    if weight_push_path(trainer) == "trl_sync_weights":
        trainer.vllm_generation.sync_weights()
    else:
        from trl.models import unwrap_model_for_generation

        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            generator.sync_weights(model)
    mark_weights_pushed(trainer)


def weight_push_path(trainer: Any) -> str:
    """How ``push_weights`` reaches vLLM: ``"trl_sync_weights"`` (TRL's own push, parameter by
    parameter: gathered one at a time under ZeRO-3, full tensors under FSDP, LoRA merged) for a
    server and for a colocated engine on CUDA; ``"reload_weights"`` (the whole unwrapped state
    through ``VLLMGenerator.sync_weights``) for a colocated engine on a CPU, where TRL's push fails
    (vLLM's CPU backend replaces linear weights by prepacked-GEMM placeholders without a
    ``weight_loader``; docs/learners.md) and a CPU world is never sharded (the launcher refuses it)."""
    import torch

    if vllm_mode(trainer.args) == "server" or torch.cuda.is_available():
        return "trl_sync_weights"
    return "reload_weights"


def weights_pushed(trainer: Any) -> bool:
    """Whether vLLM holds the weights of the trainer's current optimizer step: TRL's own record,
    ``GRPOTrainer._last_loaded_step`` (private; tests/test_live_policy.py fails if TRL renames it)."""
    return trainer._last_loaded_step == trainer.state.global_step


def mark_weights_pushed(trainer: Any) -> None:
    """Tell TRL that vLLM holds the current step's weights (the record ``weights_pushed`` reads)."""
    trainer._last_loaded_step = trainer.state.global_step


def _server_client(trainer: Any) -> Any:
    """TRL's ``VLLMClient`` of a server-mode trainer. TRL makes one on the main process only (it
    also holds the weight-sync group); another rank gets a client of its own, for generation only,
    kept where TRL keeps its own."""
    generation = trainer.vllm_generation
    if getattr(generation, "vllm_client", None) is None:
        from trl.generation.vllm_client import VLLMClient

        args = trainer.args
        url = args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
        generation.vllm_client = VLLMClient(base_url=url, connection_timeout=args.vllm_server_timeout)
    return generation.vllm_client


class ServerGenerator:
    """A ``Generator`` over a vLLM server through TRL's ``VLLMClient`` (text models).

    Prompts are rendered and tokenised by the shared ``render_prompt`` and sent as token ids, so
    the server reads what ``TransformersGenerator`` and ``VLLMGenerator`` read. Each prompt is one
    request with its own seed (``seeds``, else derived from ``Sampling.seed``), sent concurrently:
    the server batches them, and a seeded prompt's samples depend on its seed alone, not on what
    else is in flight. Completions follow ``VLLMGenerator``'s conventions (``text`` decoded
    without special tokens and cut before a stop string; ``logprobs`` of the sampled tokens)."""

    accepts_images = False

    def __init__(self, client: Any, tokenizer: Any) -> None:
        from transformers import ProcessorMixin

        if isinstance(tokenizer, ProcessorMixin):
            raise ValueError(
                "vllm_mode: server serves councilzoo's generation paths for text models only; "
                "train a vision-language model with vllm_mode: colocate or without vLLM"
            )
        self.client, self.tokenizer = client, tokenizer

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None, seeds: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in prompt order; ``seeds`` as in ``VLLMGenerator.generate``."""
        sampling = check_request(prompts, n, sampling)
        if seeds is None:
            seeds = (
                [None] * len(prompts) if sampling.seed is None else prompt_seeds(sampling.seed, len(prompts))
            )
        elif len(seeds) != len(prompts):
            raise ValueError(f"seeds must hold one seed per prompt, got {len(seeds)} for {len(prompts)}")
        ids = [render_prompt(self.tokenizer, p) for p in prompts]
        copies = 1 if sampling.greedy else n  # greedy samples are identical: decode once, copy
        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(_SERVER_CONCURRENCY, len(prompts))) as pool:
            groups = list(
                pool.map(lambda i: self._request(ids[i], copies, sampling, seeds[i]), range(len(ids)))
            )
        return [group * (n // copies) for group in groups]

    def _request(
        self, prompt_ids: list[int], copies: int, sampling: Sampling, seed: int | None
    ) -> list[Completion]:
        extra: dict[str, Any] = {} if seed is None else {"seed": seed}
        if sampling.stop:
            extra["stop"] = list(sampling.stop)
        out = self.client.generate(
            [prompt_ids], n=copies, temperature=sampling.temperature, top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens, logprobs=0, generation_kwargs=extra,
        )  # fmt: skip
        return [
            self._completion(prompt_ids, tokens, [lp[0] for lp in logprobs], sampling)
            for tokens, logprobs in zip(out["completion_ids"], out["logprobs"], strict=True)
        ]

    def _completion(
        self, prompt_ids: list[int], tokens: list[int], logprobs: list[float], sampling: Sampling
    ):
        # bytes of a character left incomplete at the end decode to U+FFFD: drop them, as vLLM does
        text = self.tokenizer.decode(tokens, skip_special_tokens=True).rstrip("\ufffd")
        cut = first_stop(text, sampling.stop)
        stopped = cut is not None or (tokens and tokens[-1] == self.tokenizer.eos_token_id)
        return Completion(
            text=text if cut is None else text[:cut],
            token_ids=list(tokens),
            logprobs=logprobs,
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(tokens),
            finish_reason="length" if len(tokens) >= sampling.max_new_tokens and not stopped else "stop",
            prompt_token_ids=list(prompt_ids),
        )
