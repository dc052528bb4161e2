"""The one agent factory: an ``Agent`` from a ``ModelSpec`` (type, constructor and LLMAgent
keyword arguments), used by ``councilzoo eval``'s agents config and by TRACER's roles alike.

``type`` is ``simulated`` (``SimulatedAgent(name, **kwargs)``), ``transformers`` / ``openai``
(an ``LLMAgent`` over ``make_generator({"backend": type, **kwargs})``, ``agent`` holding the
LLMAgent's own keyword arguments) or ``"package.module:Class"``: any class whose instances have
``act(contexts) -> actions`` (the ``Agent`` protocol), built as ``Class(**kwargs)``.
``check_keywords`` rejects a keyword the target class does not accept before anything is built;
errors name the spec as ``models.<name>``.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from councilzoo.agents.base import Agent
from councilzoo.config import ConfigError, did_you_mean

__all__ = ["ModelSpec", "import_object", "check_keywords", "build_model", "build_models"]

BUILTIN_TYPES = ("simulated", "transformers", "openai")


@dataclass
class ModelSpec:
    type: str = field(metadata={"help": "simulated | transformers | openai | package.module:Class"})
    kwargs: dict[str, Any] = field(default_factory=dict, metadata={"help": "constructor keyword arguments"})
    agent: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "LLMAgent keyword arguments (transformers / openai only)"}
    )

    def __post_init__(self) -> None:
        if self.type not in BUILTIN_TYPES and ":" not in self.type:
            raise ValueError(
                f"model type must be one of {BUILTIN_TYPES} or 'package.module:Class', got {self.type!r}"
            )


def import_object(path: str, what: str = "import path") -> Any:
    """The object named by ``"package.module:name"`` (a class, a function that builds one, a prompt
    renderer); a ValueError naming ``what`` and ``path`` when it cannot be imported."""
    module_name, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{what} {path!r}: cannot import {attr!r} from {module_name!r} ({err})") from err


def _accepted(spec: ModelSpec) -> dict[str, tuple[str, list[str] | None]]:
    """Per keyword mapping of ``spec``: the class it goes to and the keywords it accepts (None: any)."""

    def keywords(target: Callable, positional: int = 0, reserved: tuple[str, ...] = ()) -> list[str] | None:
        params = inspect.signature(target).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return None
        return [p for p in list(params)[positional:] if p not in reserved]

    if spec.type == "simulated":
        from councilzoo.agents.simulated import SimulatedAgent

        return {"kwargs": ("SimulatedAgent", keywords(SimulatedAgent, reserved=("name",)))}
    if spec.type in BUILTIN_TYPES:  # make_generator passes (base_url,) model positionally
        from councilzoo.agents.generators import BACKENDS
        from councilzoo.agents.llm import LLMAgent

        module, cls = BACKENDS[spec.type]
        leading = ["base_url", "model"] if spec.type == "openai" else ["model"]
        rest = keywords(getattr(importlib.import_module(module), cls), positional=len(leading))
        return {
            "kwargs": (cls, None if rest is None else leading + rest),
            "agent": ("LLMAgent", keywords(LLMAgent, reserved=("generator", "name"))),
        }
    target = import_object(spec.type, "model type")
    return {"kwargs": (target.__name__, keywords(target))}


def check_keywords(name: str, spec: ModelSpec) -> None:
    """Raise a ConfigError, one line per keyword of ``spec`` that its class does not accept (a typo)."""
    try:
        sections = _accepted(spec)
    except ValueError as err:  # a class that cannot be imported
        raise ConfigError(f"models.{name}.type: {err}") from err
    problems = [
        f"models.{name}.{section}.{key}: {target} has no keyword {key!r}{did_you_mean(key, accepted)}; "
        f"accepted: {accepted}"
        for section, (target, accepted) in sections.items()
        for key in getattr(spec, section)
        if accepted is not None and key not in accepted
    ]
    if problems:
        raise ConfigError("\n".join(problems))


def build_model(name: str, spec: ModelSpec, generators: dict[str, Any] | None = None) -> Agent:
    """One Agent from its spec (see the module docstring). A constructor's complaint about a value
    (wrong type or range, a model directory that does not exist) and an endpoint that does not
    answer (checked now, not after the first batch's retries) are ConfigErrors naming the model.
    ``generators``: transformers generators already built, by their ``kwargs``, to reuse."""
    from councilzoo.agents.generators import GenerationError

    try:
        agent = _construct(name, spec, {} if generators is None else generators)
        if spec.type == "openai":
            agent.generator.check_reachable()
    except GenerationError as err:
        raise ConfigError(f"models.{name}.kwargs.base_url: {err}") from err
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise ConfigError(f"models.{name}: {err}") from err
    if not isinstance(agent, Agent):
        raise TypeError(f"model {name!r} ({spec.type}) built a {type(agent).__name__} without act(contexts)")
    return agent


def _construct(name: str, spec: ModelSpec, generators: dict[str, Any]) -> Agent:
    if spec.type == "simulated":
        from councilzoo.agents.simulated import SimulatedAgent

        return SimulatedAgent(name, **spec.kwargs)
    if spec.type in ("transformers", "openai"):
        from councilzoo.agents.base import Sampling
        from councilzoo.agents.generators import make_generator
        from councilzoo.agents.llm import LLMAgent

        options = dict(spec.agent)
        if isinstance(options.get("sampling"), dict):
            sampling = dict(options["sampling"])
            sampling["stop"] = tuple(sampling.get("stop", ()))  # YAML's list: the engine hashes Sampling
            options["sampling"] = Sampling(**sampling)
        if spec.type == "openai":
            generator = make_generator({"backend": "openai", **spec.kwargs})
            return LLMAgent(name=name, generator=generator, **options)
        key = json.dumps(spec.kwargs, sort_keys=True, default=str)  # one copy of the weights per model
        if key not in generators:
            generators[key] = make_generator({"backend": "transformers", **spec.kwargs})
        return LLMAgent(name=name, generator=generators[key], **options)
    return import_object(spec.type, "model type")(**spec.kwargs)


def build_models(specs: Mapping[str, ModelSpec]) -> dict[str, Agent]:
    """Every model of ``specs``, built once, by name. Seats of one local transformers model (specs
    with equal ``kwargs``) share one generator: a council of five seats of a model holds its
    weights once, not five times."""
    generators: dict[str, Any] = {}
    return {name: build_model(name, spec, generators) for name, spec in specs.items()}
