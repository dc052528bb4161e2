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

Each model is a ``ModelSpec`` built by the one agent factory, ``councilzoo.agents.factory`` (its
docstring lists the types). A model named in several roles is one object (so one generator and
one cache).

``load_council(path)`` reads the file and checks it before any model is built: YAML syntax, the
layout above, and each model's keyword arguments against what its class accepts. Every mistake
is a ``ConfigError`` naming the file and, where there is one, the line of the offending key
(``agents.yaml, line 4: models.medium.kwargs.skil: ...``); ``agents_file(path)`` does the same for
errors found while the models are built (a value of the wrong type, an unreachable endpoint).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from councilzoo.agents.factory import ModelSpec, check_keywords
from councilzoo.config import ConfigError, load_config

__all__ = ["ComedSettings", "CouncilConfig", "load_council", "agents_file"]


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
