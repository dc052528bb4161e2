"""The agents config of ``councilzoo eval`` / ``demo``: which models exist and who plays what.

YAML layout (loaded with ``councilzoo.config.load_config`` into ``CouncilConfig``)::

    models:                      # every model, by a name of your choice
      medium: {type: simulated, kwargs: {skill: 0.62, correlation: 0.3}}
      qwen:   {type: transformers, kwargs: {model: /path/to/model}, agent: {max_new_tokens: 256}}
      api:    {type: openai, kwargs: {model: my-model, base_url: "http://127.0.0.1:8000/v1"}}
      mine:   {type: "mypkg.agents:MyAgent", kwargs: {temperature: 0.3}}
    anchor: medium               # the model that answers first (COMED's anchor; "single")
    peers: [qwen, api, mine]     # the k models COMED escalates to (peer_0 is the probe)
    verifier: medium             # the adjudicator of VERIFY
    debaters: [qwen, api, mine]  # dense debate's agents (default: peers)
    router_pool: [medium, qwen]  # models a router may choose among (default: anchor + peers)

``type`` is ``simulated`` (``SimulatedAgent(name, **kwargs)``), ``transformers`` / ``openai``
(an ``LLMAgent`` over ``make_generator({"backend": type, **kwargs})``, ``agent`` holding the
LLMAgent's own keyword arguments) or ``"package.module:Class"``: any class whose instances have
``act(contexts) -> actions`` (the ``Agent`` protocol), built as ``Class(**kwargs)``. A model named
in several roles is one object (so one generator and one cache).

``load_council(path)`` reads the file and checks it before any model is built: YAML syntax, the
layout above, and each model's keyword arguments against what its class accepts. Every mistake
is a ``ConfigError`` naming the file and, where there is one, the line of the offending key
(``agents.yaml, line 4: models.medium.kwargs.skil: ...``); ``agents_file(path)`` does the same for
errors found while the models are built (a value of the wrong type, an unreachable endpoint).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from councilzoo.agents.base import Agent
from councilzoo.config import ConfigError, load_config

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


@dataclass
class ComedSettings:
    """How COMED is fitted; thresholds are searched on the dev split only."""

    lam: float = field(default=0.02, metadata={"help": "cost penalty per unit in accuracy - lam * cost"})
    cost_unit: str = field(default="calls", metadata={"help": "calls | ktokens (1,000 decoded tokens)"})
    target_escalation_rate: float | None = field(
        default=None, metadata={"help": "fit the best accuracy at or below this escalation rate instead"}
    )
    dev_size: int = field(
        default=200, metadata={"help": "number of dev problems for the router and thresholds"}
    )
    dev_split: str = field(
        default="train", metadata={"help": "dev split of a named dataset (never the test)"}
    )
    routed_anchor: bool = field(default=False, metadata={"help": "anchor chosen per question by the router"})

    def __post_init__(self) -> None:
        if self.cost_unit not in ("calls", "ktokens"):
            raise ValueError(f"comed.cost_unit must be 'calls' or 'ktokens', got {self.cost_unit!r}")
        if self.dev_size < 10:
            raise ValueError(f"comed.dev_size must be >= 10, got {self.dev_size}")


@dataclass
class CouncilConfig:
    models: dict[str, ModelSpec] = field(metadata={"help": "every model by name"})
    anchor: str = field(metadata={"help": "the model that answers first"})
    peers: list[str] = field(metadata={"help": "the k models collaboration escalates to; peers[0] probes"})
    verifier: str = field(metadata={"help": "the model that adjudicates VERIFY"})
    debaters: list[str] = field(
        default_factory=list, metadata={"help": "dense debate's agents (default peers)"}
    )
    router_pool: list[str] = field(
        default_factory=list, metadata={"help": "models the router chooses among (default anchor + peers)"}
    )
    samples: int = field(default=5, metadata={"help": "anchor samples for self-consistency and COMED"})
    debate_rounds: int = field(
        default=2, metadata={"help": "rounds of dense debate and of COMED's escalation"}
    )
    comed: ComedSettings = field(default_factory=ComedSettings, metadata={"help": "COMED fitting"})

    def __post_init__(self) -> None:
        self.debaters = list(self.debaters or self.peers)
        self.router_pool = list(self.router_pool or dict.fromkeys([self.anchor, *self.peers]))
        named = {
            "anchor": [self.anchor],
            "peers": self.peers,
            "verifier": [self.verifier],
            "debaters": self.debaters,
            "router_pool": self.router_pool,
        }
        for role, names in named.items():
            missing = [n for n in names if n not in self.models]
            if missing:
                raise ValueError(f"{role} names unknown model(s) {missing}; models: {sorted(self.models)}")
        if not self.peers or len(self.debaters) < 2:
            raise ValueError(
                f"need >= 1 peer and >= 2 debaters, got peers={self.peers}, debaters={self.debaters}"
            )
        if self.comed.routed_anchor and len(self.router_pool) < 2:
            raise ValueError(f"comed.routed_anchor needs >= 2 models in router_pool, got {self.router_pool}")
        if self.samples < 1 or self.debate_rounds < 1:
            raise ValueError(
                f"samples and debate_rounds must be >= 1, got {self.samples}, {self.debate_rounds}"
            )


def _import_class(path: str) -> type:
    module_name, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"model type {path!r}: cannot import {attr!r} from {module_name!r} ({err})") from err


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
    target = _import_class(spec.type)
    return {"kwargs": (target.__name__, keywords(target))}


def check_keywords(name: str, spec: ModelSpec) -> None:
    """Raise a ConfigError for a keyword of ``spec`` that its class does not accept (a typo)."""
    try:
        sections = _accepted(spec)
    except ValueError as err:  # a class that cannot be imported
        raise ConfigError(f"models.{name}.type: {err}") from err
    for section, (target, accepted) in sections.items():
        for key in getattr(spec, section):
            if accepted is not None and key not in accepted:
                close = difflib.get_close_matches(key, accepted, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(
                    f"models.{name}.{section}.{key}: {target} has no keyword {key!r}{hint}; "
                    f"accepted: {accepted}"
                )


def build_model(name: str, spec: ModelSpec) -> Agent:
    """One Agent from its spec (see the module docstring). A constructor's complaint about a value
    (wrong type or range, a model directory that does not exist) and an endpoint that does not
    answer (checked now, not after the first batch's retries) are ConfigErrors naming the model."""
    from councilzoo.agents.generators import GenerationError

    try:
        agent = _construct(name, spec)
        if spec.type == "openai":
            agent.generator.check_reachable()
    except GenerationError as err:
        raise ConfigError(f"models.{name}.kwargs.base_url: {err}") from err
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise ConfigError(f"models.{name}: {err}") from err
    if not isinstance(agent, Agent):
        raise TypeError(f"model {name!r} ({spec.type}) built a {type(agent).__name__} without act(contexts)")
    return agent


def _construct(name: str, spec: ModelSpec) -> Agent:
    if spec.type == "simulated":
        from councilzoo.agents.simulated import SimulatedAgent

        return SimulatedAgent(name, **spec.kwargs)
    if spec.type in ("transformers", "openai"):
        from councilzoo.agents.base import Sampling
        from councilzoo.agents.generators import make_generator
        from councilzoo.agents.llm import LLMAgent

        options = dict(spec.agent)
        if isinstance(options.get("sampling"), dict):
            options["sampling"] = Sampling(**options["sampling"])
        return LLMAgent(name=name, generator=make_generator({"backend": spec.type, **spec.kwargs}), **options)
    return _import_class(spec.type)(**spec.kwargs)


def build_models(config: CouncilConfig) -> dict[str, Agent]:
    """Every model of ``config``, built once, by name."""
    return {name: build_model(name, spec) for name, spec in config.models.items()}


def load_council(path: str | Path) -> CouncilConfig:
    """The agents config in the YAML file ``path``, checked (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"agents config {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from None
    with agents_file(path):
        council = load_config(data or {}, CouncilConfig)
        for name, spec in council.models.items():
            check_keywords(name, spec)
    return council


@contextmanager
def agents_file(path: str | Path) -> Iterator[None]:
    """Re-raise a ConfigError from inside prefixed with ``path`` and the line of its key."""
    try:
        yield
    except ConfigError as err:
        message = str(err)
        key_path = re.match(r"[\w-]+(?:\.[\w-]+|\[\d+\])*(?=:)", message)
        line = _line_of(Path(path), key_path.group(0)) if key_path else None
        raise ConfigError(f"{path}{f', line {line}' if line else ''}: {message}") from err


def _line_of(path: Path, key_path: str) -> int | None:
    """The 1-based line of ``key_path`` ("models.medium.kwargs.skil", "peers[1]") in the file."""
    try:
        node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for key in re.findall(r"[^.\[\]]+", key_path):
        if isinstance(node, yaml.MappingNode):
            entry = next(((k, v) for k, v in node.value if k.value == key), None)
            if entry is None:
                return None
            line, node = entry[0].start_mark.line + 1, entry[1]
        elif isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            node = node.value[int(key)]
            line = node.start_mark.line + 1
        else:
            return None
    return line
