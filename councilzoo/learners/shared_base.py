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

The same turns serve trainers of separate models in one world (``AdapterTurns(None)``: the
two-model run a shared-base run is compared with), and trainers that train on parts of one
played round (``SharedRounds``: TRACER's proposer and reviewer, one step played for both).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = [
    "check_group", "check_turn_taking", "AdapterTurns", "LocalExchange", "PausingLink", "SharedRounds",
    "run_threads", "load_shared_base",
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
    return problems + check_turn_taking(f"shared_base {group!r}", trainer, report_to)


def check_turn_taking(
    where: str, trainer: Mapping[str, Mapping[str, Any]], report_to: Sequence[str]
) -> list[str]:
    """Problems (one line each, starting with ``where``) with trainer settings, by trainer name,
    of trainers that take turns in one world (``AdapterTurns``)."""
    problems = []
    for name, settings in trainer.items():
        wrong = {k: settings[k] for k, v in _ONE_STEP_PER_BATCH.items() if settings.get(k, v) != v}
        if wrong:
            problems.append(f"{where}: {name} sets {wrong}; trainers taking turns in one world train with "
                            f"{_ONE_STEP_PER_BATCH} (they share accelerate's GradientState)")
    vllm = sorted(name for name, settings in trainer.items() if settings.get("use_vllm"))
    if vllm:
        problems.append(f"{where}: {vllm} set use_vllm, which trainers taking turns in one world do not "
                        "have yet (one vLLM engine serving every adapter); leave it unset: they generate "
                        "with transformers")
    batches = {name: settings.get("per_device_train_batch_size") for name, settings in trainer.items()}
    if len(set(batches.values())) > 1:
        problems.append(f"{where}: per_device_train_batch_size differs, {batches}; its trainers "
                        "share one world's batch layout (the placement plan), so set it alike or not at all")
    trackers = sorted(set(report_to) & set(_TRACKERS_PER_PROCESS))
    if trackers and len(trainer) > 1:
        problems.append(f"{where}: report_to {trackers} names one run per process; use "
                        "tensorboard (a folder per trainer) or none")
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
    thread waits for something other adapters provide. With ``model`` None the turns are those of
    trainers of separate models (names, not adapters): the same order and random states."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._rng: dict[str, tuple] = {}

    def save_rng(self, adapter: str) -> None:
        """Keep the current random-number state as ``adapter``'s (called once its trainer is built)."""
        self._rng[adapter] = _rng_state()

    def _enter(self, adapter: str) -> None:
        self._lock.acquire()
        if self.model is not None:
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


class _Waiters:
    """What the threads of one world wait on: one condition, and the failure that wakes and stops
    every waiter (``fail``)."""

    def __init__(self, turns: AdapterTurns) -> None:
        self.turns = turns
        self._changed = threading.Condition()
        self.failure: str | None = None

    def fail(self, reason: str) -> None:
        with self._changed:
            self.failure = reason
            self._changed.notify_all()

    @contextmanager
    def _once(self, adapter: str, ready: Callable[[], bool]) -> Iterator[None]:
        """Out of ``adapter``'s turn until ``ready()``, then holding the condition; ``PeerFailed``
        when a peer failed meanwhile."""
        with self.turns.pause(adapter), self._changed:
            self._changed.wait_for(lambda: self.failure is not None or ready())
            if self.failure is not None:
                raise PeerFailed(self.failure)
            yield


class LocalExchange(_Waiters):
    """Own labels between the adapters of one world, by (round, problem key): the peer-reward
    exchange without a network link. ``link(index, adapter)`` is member ``index``'s side, with
    ``CohortLink``'s ``publish`` and ``collect``; ``fail(reason)`` wakes and stops every waiter."""

    def __init__(self, num_members: int, turns: AdapterTurns) -> None:
        super().__init__(turns)
        self.num_members = num_members
        self._labels: dict[tuple[int, int], Mapping[str, str | None]] = {}

    def publish(self, index: int, step: int, labels: Mapping[str, str | None]) -> None:
        with self._changed:
            self._labels[step, index] = dict(labels)
            self._labels.pop((step - 2, index), None)  # every peer has read it (it published step - 1)
            self._changed.notify_all()

    def collect(self, adapter: str, step: int, problem_ids: Sequence[str]) -> dict[str, list[str | None]]:
        members = range(self.num_members)
        with self._once(adapter, lambda: all((step, m) in self._labels for m in members)):
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


class SharedRounds(_Waiters):
    """One round played for several trainers of one world, each training on its part of it: each
    trainer's ``rollout_func`` asks for its part of its ``k``-th round (``take``). The lead (the
    first name) makes round ``k`` once every trainer has asked for it, so after every trainer's
    updates of round ``k - 1``, in the lead's own turn: ``make()`` returns every trainer's part by
    name. ``fail(reason)`` wakes and stops every waiter."""

    def __init__(
        self, turns: AdapterTurns, names: Sequence[str], make: Callable[[], Mapping[str, Any]]
    ) -> None:
        super().__init__(turns)
        self.names, self.make = tuple(names), make
        self._asked = dict.fromkeys(self.names, -1)
        self._parts: dict[tuple[str, int], Any] = {}

    def take(self, name: str, k: int) -> Any:
        lead = name == self.names[0]
        with self._changed:
            self._asked[name] = k
            self._changed.notify_all()
        ready = (lambda: min(self._asked.values()) >= k) if lead else (lambda: (name, k) in self._parts)
        with self._once(name, ready):
            if not lead:
                return self._parts.pop((name, k))
        parts = self.make()  # back in the lead's turn
        with self._changed:
            self._parts.update({(other, k): parts[other] for other in self.names[1:]})
            self._changed.notify_all()
        return parts[name]


def run_threads(
    jobs: Mapping[str, Callable[[], None]], on_failure: Callable[[str], None] | None = None
) -> None:
    """Run each job in a thread of its own and wait for all of them. The first failure is passed
    to ``on_failure`` (which wakes the peers waiting on the failed one) and raised here."""
    errors: list[BaseException] = []

    def run(name: str, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - raised again by the calling thread
            errors.append(exc)
            if on_failure is not None:
                on_failure(f"{name!r} failed: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=item, name=item[0]) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


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
