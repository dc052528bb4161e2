"""The learner contract and registry behind ``councilzoo train NAME CONFIG``.

A learner is a class with a ``name``, a ``config_class`` (a dataclass whose run-level fields use
TRL's names: ``output_dir``, ``max_steps``, ``save_steps``, ``report_to``, ``seed``) and
``train(resume=False, overwrite=False)``. ``register_learner`` adds one under its name; the
built-in learners register lazily, so listing them imports no torch.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from councilzoo.config import ConfigError

__all__ = ["Learner", "register_learner", "learner_names", "get_learner"]

_BUILTIN = {
    "corl": "councilzoo.learners.corl.learner",
    "grpo": "councilzoo.learners.baselines",
    "ttrl": "councilzoo.learners.baselines",
    "rent": "councilzoo.learners.baselines",
    "intuitor": "councilzoo.learners.baselines",
    "tracer": "councilzoo.learners.tracer.learner",
}
_REGISTRY: dict[str, type[Learner]] = {}


class Learner(ABC):
    """``Learner(cfg).train(resume=...)``: one training run of a validated config."""

    name: ClassVar[str]
    config_class: ClassVar[type]

    def __init__(self, cfg: Any) -> None:
        if not isinstance(cfg, self.config_class):
            raise TypeError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(cfg).__name__}"
            )
        self.cfg = cfg

    @abstractmethod
    def train(self, resume: bool = False, overwrite: bool = False) -> list[dict]:
        """Run to ``cfg.max_steps`` (continuing the run in ``cfg.output_dir`` with ``resume``);
        returns the final metrics row of each trained model."""

    def resume_step(self) -> int | None:
        """The step a ``--resume`` continues after (its newest checkpoint), or None when unknown;
        recorded with the settings a resume changes."""
        return None


def register_learner(cls: type[Learner]) -> type[Learner]:
    """Class decorator: make ``cls`` available as ``councilzoo train <cls.name>``."""
    _REGISTRY[cls.name] = cls
    return cls


def learner_names() -> list[str]:
    return sorted(set(_BUILTIN) | set(_REGISTRY))


def get_learner(name: str) -> type[Learner]:
    """The learner class registered as ``name``, or a ``package.module:Class`` import path
    (``ConfigError`` listing the known ones if neither)."""
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"learner {name!r} cannot be imported: {exc}") from exc
        if not (isinstance(cls, type) and issubclass(cls, Learner)):
            raise ConfigError(f"learner {name!r} is not a councilzoo Learner subclass")
        return cls
    if name not in _REGISTRY and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])
    if name not in _REGISTRY:
        raise ConfigError(f"unknown learner {name!r}; expected one of {learner_names()}")
    return _REGISTRY[name]
