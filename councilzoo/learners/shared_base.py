"""Many trained agents on one base model: a LoRA adapter each, on one PEFT model, in one world.

Agents that train the same model (Co-RL members, TRACER roles) need not hold a copy of it each:
the base is loaded once, every agent gets its own LoRA adapter on it (PEFT's multi-adapter
``PeftModel``: ``add_adapter``, ``set_adapter``), and each adapter is trained by its own TRL
``GRPOTrainer`` (``engine.trainer_class`` with ``adapter=``: it saves that adapter only), so it
keeps its own optimizer state, learning-rate schedule, checkpoints and metrics. No update loop is
written here.

``GRPOTrainer.train()`` owns its loop, so each trainer runs in a thread of its own, and the
threads take turns on the shared model (``AdapterTurns``): one runs at a time, with its adapter
active and its own random-number state restored, and it hands the turn on only where it waits
for its peers (the peer-reward exchange: ``LocalExchange`` between the adapters of one world,
no network link; ``PausingLink`` around a ``CohortLink`` when members of other worlds take
part). Between two hand-overs an adapter's trainer sees exactly what it would see alone in a
world of its own, so the updates are those of separate models (tested within float tolerance).

TRL trainers in one process share accelerate's ``GradientState``; that is harmless while every
adapter takes one optimizer step per micro-batch (``gradient_accumulation_steps`` 1), which
``check_group`` requires.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "check_group", "AdapterTurns", "LocalExchange", "PausingLink", "load_shared_base",
]

# Trainer settings every adapter of one world must leave at these values (see the module docstring).
_ONE_STEP_PER_BATCH = {"gradient_accumulation_steps": 1, "beta": 0.0}
_TRACKERS_PER_PROCESS = ("wandb", "trackio")  # they read one run name from the process environment


def check_group(
    group: str, models: Mapping[str, str], peft: Mapping[str, Any], trainer: Mapping[str, Mapping[str, Any]],
    report_to: Sequence[str],
) -> list[str]:
    """Problems (one line each) with the agents of base group ``group``: each agent's model,
    LoRA settings and trainer settings, by agent name."""
    problems = []
    if len(set(models.values())) > 1:
        problems.append(f"shared_base {group!r}: its agents must name one model, got {dict(models)}")
    missing = [name for name in models if not peft.get(name)]
    if missing:
        problems.append(f"shared_base {group!r}: {missing} give no 'peft' (each agent on a shared base "
                        "trains its own LoRA adapter)")
    for name, settings in trainer.items():
        wrong = {k: settings[k] for k, v in _ONE_STEP_PER_BATCH.items() if settings.get(k, v) != v}
        if wrong:
            problems.append(f"shared_base {group!r}: {name} sets {wrong}; adapters on one base train with "
                            f"{_ONE_STEP_PER_BATCH} (their trainers share accelerate's GradientState)")
    vllm = sorted(name for name, settings in trainer.items() if settings.get("use_vllm"))
    if vllm:
        problems.append(f"shared_base {group!r}: {vllm} set use_vllm, which adapters on one base do not "
                        "have yet (one vLLM engine serving every adapter); leave it unset: they generate "
                        "with transformers")
    batches = {name: settings.get("per_device_train_batch_size") for name, settings in trainer.items()}
    if len(set(batches.values())) > 1:
        problems.append(f"shared_base {group!r}: per_device_train_batch_size differs, {batches}; its agents "
                        "share one world's batch layout (the placement plan), so set it alike or not at all")
    trackers = sorted(set(report_to) & set(_TRACKERS_PER_PROCESS))
    if trackers and len(models) > 1:
        problems.append(f"shared_base {group!r}: report_to {trackers} names one run per process; use "
                        "tensorboard (a folder per adapter) or none")
    return problems


def _rng_state() -> tuple:
    import numpy as np
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda


def _set_rng_state(state: tuple) -> None:
    import numpy as np
    import torch

    python, numpy_state, cpu, cuda = state
    random.setstate(python)
    np.random.set_state(numpy_state)
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


class AdapterTurns:
    """Turns on one ``PeftModel``: a thread works on the model only inside ``turn(adapter)``,
    with that adapter active and the adapter's own random-number state (Python, numpy, torch) in
    place, as if it were alone in its process; ``pause(adapter)`` hands the turn on while the
    thread waits for something other adapters provide."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._rng: dict[str, tuple] = {}

    def save_rng(self, adapter: str) -> None:
        """Keep the current random-number state as ``adapter``'s (called once its trainer is built)."""
        self._rng[adapter] = _rng_state()

    def _enter(self, adapter: str) -> None:
        self._lock.acquire()
        self.model.set_adapter(adapter)
        if adapter in self._rng:
            _set_rng_state(self._rng[adapter])

    def _leave(self, adapter: str) -> None:
        self._rng[adapter] = _rng_state()
        self._lock.release()

    @contextmanager
    def turn(self, adapter: str) -> Iterator[None]:
        self._enter(adapter)
        try:
            yield
        finally:
            self._leave(adapter)

    @contextmanager
    def pause(self, adapter: str) -> Iterator[None]:
        self._leave(adapter)
        try:
            yield
        finally:
            self._enter(adapter)


class PeerFailed(RuntimeError):
    """Another adapter of the world failed; this one stops too."""


class LocalExchange:
    """Own labels between the adapters of one world, by (round, problem key): the peer-reward
    exchange without a network link. ``link(index, adapter)`` is member ``index``'s side, with
    ``CohortLink``'s ``publish`` and ``collect``; ``fail(reason)`` wakes and stops every waiter."""

    def __init__(self, num_members: int, turns: AdapterTurns) -> None:
        self.num_members, self.turns = num_members, turns
        self._labels: dict[tuple[int, int], Mapping[str, str | None]] = {}
        self._changed = threading.Condition()
        self.failure: str | None = None

    def fail(self, reason: str) -> None:
        with self._changed:
            self.failure = reason
            self._changed.notify_all()

    def publish(self, index: int, step: int, labels: Mapping[str, str | None]) -> None:
        with self._changed:
            self._labels[step, index] = dict(labels)
            self._labels.pop((step - 2, index), None)  # every peer has read it (it published step - 1)
            self._changed.notify_all()

    def collect(self, adapter: str, step: int, problem_ids: Sequence[str]) -> dict[str, list[str | None]]:
        members = range(self.num_members)
        with self.turns.pause(adapter), self._changed:
            self._changed.wait_for(
                lambda: self.failure is not None or all((step, m) in self._labels for m in members)
            )
            if self.failure is not None:
                raise PeerFailed(self.failure)
            return {pid: [self._labels[step, m][pid] for m in members] for pid in problem_ids}

    def link(self, index: int, adapter: str) -> _LocalLink:
        return _LocalLink(self, index, adapter)


class _LocalLink:
    """Member ``index``'s side of a ``LocalExchange`` (what ``CohortReward`` calls)."""

    def __init__(self, exchange: LocalExchange, index: int, adapter: str) -> None:
        self.exchange, self.index, self.adapter = exchange, index, adapter

    def publish(self, step: int, labels: Mapping[str, str | None]) -> None:
        self.exchange.publish(self.index, step, labels)

    def collect(self, step: int, problem_ids: Sequence[str]) -> dict[str, list[str | None]]:
        return self.exchange.collect(self.adapter, step, problem_ids)


class PausingLink:
    """A ``CohortLink`` (members in other worlds take part) whose ``collect`` hands the turn on
    while it waits for the peers."""

    def __init__(self, link: Any, turns: AdapterTurns, adapter: str) -> None:
        self.link, self.turns, self.adapter = link, turns, adapter

    def publish(self, step: int, labels: Mapping[str, str | None]) -> None:
        self.link.publish(step, labels)

    def collect(self, step: int, problem_ids: Sequence[str]) -> dict[str, list[str | None]]:
        with self.turns.pause(self.adapter):
            return self.link.collect(step, problem_ids)


def load_shared_base(
    model_path: str, adapters: Mapping[str, Mapping[str, Any]], seed: int, dtype: Any = None
) -> Any:
    """The base model at ``model_path``, loaded once, with one LoRA adapter per entry of
    ``adapters`` (name -> ``peft.LoraConfig`` arguments). Each adapter is initialised as TRL
    initialises a lone model's (``set_seed(seed)``, then the LoRA layers), so a shared-base run
    starts from the weights of the separate-model run."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from transformers.trainer_utils import set_seed

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype or torch.float32)
    peft_model = None
    for name, settings in adapters.items():
        config = LoraConfig(task_type="CAUSAL_LM", **dict(settings))
        set_seed(seed)
        if peft_model is None:
            peft_model = get_peft_model(model, config, adapter_name=name)
        else:
            peft_model.add_adapter(name, config)
    return peft_model
