"""What a protocol reads of the evaluation that runs it, and the batch of episodes it asks for.

Protocols (``protocols.py``) are functions of an ``EvaluationContext``; ``harness.Evaluation`` is
the one implementation. Naming the interface here, rather than importing ``Evaluation``, keeps the
harness -> protocols dependency one-way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from councilzoo.agents.base import Agent
from councilzoo.agents.controllers.comed_gate import ComedThresholds, GateOutcomes
from councilzoo.envs.types import EpisodeRecord
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.metrics import ProtocolResult
from councilzoo.evaluation.router import LogisticRouter
from councilzoo.tasks import Problem

__all__ = ["Run", "EvaluationContext"]


@dataclass
class Run:
    """One batch of episodes to play: a game, its arguments and who sits where."""

    env_id: str
    env_kwargs: dict[str, Any]
    agents: dict[str, Agent]


class EvaluationContext(Protocol):
    """One agents config on one test set, with the dev split and every cached result."""

    council: CouncilConfig
    test: list[Problem]
    models: dict[str, Agent]
    seed: int
    probe_seat: str

    @property
    def dev(self) -> list[Problem]: ...

    @property
    def router(self) -> LogisticRouter: ...

    @property
    def router_oof(self) -> np.ndarray: ...

    @property
    def anchor_draws(self) -> list[EpisodeRecord]: ...

    @property
    def comed_outcomes(self) -> GateOutcomes: ...

    @property
    def comed_fit(self) -> tuple[ComedThresholds, dict[str, float]]: ...

    def play(self, name: str, run: Run, problems: Sequence[Problem], label: str) -> list[EpisodeRecord]: ...

    def result(self, protocol: str) -> ProtocolResult: ...

    def dev_single(self, name: str) -> ProtocolResult: ...

    def test_single(self, name: str) -> ProtocolResult: ...
