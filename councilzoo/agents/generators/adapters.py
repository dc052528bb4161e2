"""One base model in memory, several LoRA adapters generating from it: PEFT's mixed-batch inference.

``AdapterGenerator`` is a ``TransformersGenerator`` over a ``PeftModel`` holding every adapter
(loaded from adapter folders: a shared-base run's ``final/<name>/``, or fresh ones from LoRA
settings). ``generate(prompts, n, sampling, adapters=[...])`` names an adapter per prompt and
decodes the whole batch in one ``model.generate`` call (PEFT routes each row through its own
adapter: ``adapter_names=``); ``"__base__"`` is the base model without any adapter.
``seat(name)`` is a plain ``Generator`` for one adapter, to hand to an agent: three debaters on
one base are three seats of one ``AdapterGenerator``, one copy of the base weights.
``AdapterSeats`` is what any generator of named adapters offers its seats (the vLLM backend's
``VLLMAdapterGenerator`` too): the seats, one mixed call a tick, and the check of adapter names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from councilzoo.agents.base import Completion, Sampling
from councilzoo.agents.generators.checks import check_request
from councilzoo.agents.generators.transformers_backend import TransformersGenerator

__all__ = ["AdapterGenerator", "AdapterSeat", "AdapterSeats", "BASE"]

BASE = "__base__"  # PEFT's name for "no adapter" in a mixed batch


class AdapterSeats:
    """Seats of a generator that holds named adapters of one base (``adapters``, its names), and
    the check of a call's adapter names; the generator's ``generate`` takes ``adapters=``."""

    adapters: tuple[str, ...]

    def seat(self, adapter: str) -> AdapterSeat:
        """A ``Generator`` that generates with ``adapter`` (``BASE``: the base model)."""
        if adapter != BASE and adapter not in self.adapters:
            raise ValueError(f"no adapter {adapter!r}; this generator holds {[*self.adapters, BASE]}")
        return AdapterSeat(self, adapter)

    def mixed(self, adapter_of: Mapping[int, str]) -> _MixedCall:
        """A ``Generator`` for one call over several seats: each prompt (by ``id``) decoded by its
        adapter in ``adapter_of`` (what the rollout engine builds for the seats' turns of a tick)."""
        return _MixedCall(self, adapter_of)

    def _checked_adapters(self, prompts: list, adapters: Sequence[str] | None) -> list[str]:
        """One adapter name per prompt (default: the first adapter), each one this generator holds."""
        names = [self.adapters[0]] * len(prompts) if adapters is None else list(adapters)
        if len(names) != len(prompts):
            raise ValueError(f"adapters must name one per prompt, got {len(names)} for {len(prompts)}")
        unknown = sorted(set(names) - {*self.adapters, BASE})
        if unknown:
            raise ValueError(f"unknown adapters {unknown}; this generator holds {[*self.adapters, BASE]}")
        return names


class AdapterGenerator(AdapterSeats, TransformersGenerator):
    """A base model with named LoRA adapters (see the module docstring).

    ``adapters``: name -> an adapter folder (``adapter_config.json`` + weights) or a mapping of
    ``peft.LoraConfig`` arguments (a fresh adapter, initialised with ``seed``); ``model_or_path``
    may be a loaded ``PeftModel`` (a trainer's), whose adapters it keeps; other keywords as
    ``TransformersGenerator``'s."""

    def __init__(
        self, model_or_path: Any, adapters: Mapping[str, str | os.PathLike | Mapping[str, Any]],
        seed: int = 0, **options: Any,
    ) -> None:
        if BASE in adapters:
            raise ValueError(f"{BASE!r} names the base model without an adapter; choose another adapter name")
        if options.get("share_prompts"):
            raise ValueError("share_prompts is not supported with adapters (each row has its own adapter)")
        super().__init__(model_or_path, seed=seed, **options)
        self.model = _with_adapters(self.model, adapters, seed)
        self.adapters = tuple(self.model.peft_config)
        self._rows: list[str] = []

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None, seeds: list[int] | None = None,
        adapters: Sequence[str] | None = None,
    ) -> list[list[Completion]]:
        """``TransformersGenerator.generate`` with prompt i decoded by adapter ``adapters[i]``
        (default: the first adapter), all of them in the same batches."""
        sampling = check_request(prompts, n, sampling)
        adapters = self._checked_adapters(prompts, adapters)
        if seeds is not None:  # one call a prompt (TransformersGenerator's rule), each with its adapter
            if len(seeds) != len(prompts):
                raise ValueError(f"seeds must hold one seed per prompt, got {len(seeds)} for {len(prompts)}")
            return [
                self.generate([p], n, replace(sampling, seed=s), adapters=[a])[0]
                for p, s, a in zip(prompts, seeds, adapters, strict=True)
            ]
        copies = 1 if sampling.greedy else n  # the rows TransformersGenerator decodes, in order
        self._rows = [a for a in adapters for _ in range(copies)]
        try:
            return super().generate(prompts, n, sampling)
        finally:
            self._rows = []

    def _generate_batch(self, rows: list, sampling: Sampling, copies: int = 1) -> list[Completion]:
        names, self._rows = self._rows[: len(rows)], self._rows[len(rows):]
        self._adapter_names = names
        try:
            return super()._generate_batch(rows, sampling, copies)
        finally:
            self._adapter_names = None

    def _model_generate(self, **kwargs: Any) -> Any:
        return self.model.generate(adapter_names=self._adapter_names, **kwargs)


@dataclass(frozen=True)
class AdapterSeat:
    """One adapter of a generator of adapters (``AdapterSeats``), with the ``Generator`` interface."""

    shared: AdapterSeats
    adapter: str

    @property
    def accepts_images(self) -> bool:
        return self.shared.accepts_images

    def generate(
        self, prompts: list, n: int = 1, sampling: Sampling | None = None, seeds: list[int] | None = None
    ) -> list[list[Completion]]:
        return self.shared.generate(prompts, n, sampling, seeds, adapters=[self.adapter] * len(prompts))


@dataclass(frozen=True)
class _MixedCall:
    """``AdapterSeats.mixed``: the adapter of each prompt looked up by the prompt's identity."""

    shared: AdapterSeats
    adapter_of: Mapping[int, str]

    def generate(self, prompts: list, n: int = 1, sampling: Sampling | None = None) -> list[list[Completion]]:
        return self.shared.generate(prompts, n, sampling, adapters=[self.adapter_of[id(p)] for p in prompts])


def _with_adapters(model: Any, adapters: Mapping[str, Any], seed: int) -> Any:
    """``model`` wrapped in a ``PeftModel`` holding every adapter of ``adapters`` (a ``PeftModel``
    keeps its own adapters too)."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model

    peft_model = model if isinstance(model, PeftModel) else None
    if peft_model is None and not adapters:
        raise ValueError("AdapterGenerator needs at least one adapter, or a PeftModel that holds some")
    for name, source in adapters.items():
        if isinstance(source, Mapping):
            config = LoraConfig(task_type="CAUSAL_LM", **dict(source))
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                if peft_model is None:
                    peft_model = get_peft_model(model, config, adapter_name=name)
                else:
                    peft_model.add_adapter(name, config)
        elif peft_model is None:
            peft_model = PeftModel.from_pretrained(model, str(source), adapter_name=name)
        else:
            peft_model.load_adapter(str(source), adapter_name=name)
    return peft_model
