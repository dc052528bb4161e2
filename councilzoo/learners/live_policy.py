"""Generation with a trainer's current weights, for the paths councilzoo owns inside training:
held-out evaluation, seeded sampling and TRACER's utterances.

When the trainer generates with vLLM colocated (``trainer: {use_vllm: true, vllm_mode: colocate}``),
these paths generate on TRL's own engine (``trainer.vllm_generation.llm``; no second engine holds
the model), after pushing the trainer's weights into it if they changed since the last push
(``VLLMGenerator.sync_weights``: vLLM's in-place ``reload_weights``, LoRA merged for the copy).
Otherwise they generate with transformers on the trainer's model. Every rank of the world enters
``policy_generator`` together: under ZeRO-3 it gathers the sharded parameters, a collective.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from councilzoo.agents.base import Generator


def uses_vllm(args: Any) -> bool:
    """Whether the trainer settings make TRL colocate a vLLM engine our paths can share."""
    return bool(getattr(args, "use_vllm", False)) and getattr(args, "vllm_mode", "colocate") == "colocate"


@contextmanager
def policy_generator(trainer: Any) -> Iterator[Generator]:
    """A generator over ``trainer``'s current weights (see the module docstring)."""
    from trl.models import unwrap_model_for_generation

    if not uses_vllm(trainer.args):
        from transformers import ProcessorMixin

        from councilzoo.agents.generators.transformers_backend import TransformersGenerator

        processing = trainer.processing_class
        vlm = isinstance(processing, ProcessorMixin)
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            yield TransformersGenerator(
                model, tokenizer=None if vlm else processing, processor=processing if vlm else None
            )
        return
    from councilzoo.agents.generators.vllm_backend import VLLMGenerator

    generator = VLLMGenerator.from_engine(trainer.vllm_generation.llm)
    push_weights(trainer, generator)
    yield generator


def push_weights(trainer: Any, generator: Any) -> None:
    """Push ``trainer``'s weights into its colocated engine (``generator``, a ``VLLMGenerator`` over
    it) unless the engine holds this optimizer step's weights already. TRL's ``_last_loaded_step``
    is that record: TRL pushes before each of its generations (and before a ``rollout_func``) when it
    differs from the global step, so a push here also spares TRL its own."""
    from trl.models import unwrap_model_for_generation

    if getattr(trainer, "_last_loaded_step", -1) != trainer.state.global_step:
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            generator.sync_weights(model)
        trainer._last_loaded_step = trainer.state.global_step
