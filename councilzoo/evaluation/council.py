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

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from councilzoo.agents.factory import ModelSpec, check_keywords
from councilzoo.config import ConfigError, in_file, load_config, read_yaml

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
    """The agents config in the YAML file ``path``, checked (see the module docstring); every
    mistake in the file is reported at once, one line each."""
    with agents_file(path):
        problems: list[str] = []
        data = read_yaml(path, "agents config", problems) or {}
        try:
            council = load_config(data, CouncilConfig)
        except ConfigError as err:
            council = None
            problems += err.problems
        models = data.get("models") if isinstance(data, dict) else None
        for name, spec in (models or {}).items() if isinstance(models, dict) else ():
            try:
                check_keywords(name, load_config(spec, ModelSpec))
            except ConfigError as err:  # a spec that does not load is already among the problems
                problems += [p for p in err.problems if p not in problems and p.startswith(f"models.{name}.")]
        if problems:
            raise ConfigError("\n".join(dict.fromkeys(problems)))
    return council


@contextmanager
def agents_file(path: str | Path) -> Iterator[None]:
    """Re-raise a ConfigError from inside prefixed with ``path`` and the line of its key."""
    with in_file(path):
        yield
