"""From episode records to one protocol's scores: accuracy with a CI, cost, rescue and harm.

Every protocol is scored against an *anchor*: the single model whose answer it starts from (or
would have kept). Per problem, ``e = 1`` when the final answer came from collaboration rather
than from the anchor alone, ``Y_a`` is the anchor's correctness and ``Y_c`` the collaboration's;
``councilzoo.theory.rescue_harm`` then splits ``accuracy - anchor accuracy`` exactly into
``rescue - harm``. For escalation-v0 runs all three come from the run's own records (``e`` is
the record's ``escalated``: a VERIFY adjudication can overturn the anchor too, so it counts as
collaboration; ``escalation_rate`` in the table counts only full deliberation). Protocols without an anchor of
their own (dense debate, best single in hindsight) take ``Y_a`` from the ``single`` run on the
same problems and ``e = 1`` everywhere.

Cost is counted per problem from the records: model invocations (``Cost.calls``, so the
anchor's self-consistency samples and the peer probe count) and decoded (completion) tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from councilzoo.envs.types import EpisodeRecord
from councilzoo.theory.rescue_harm import rescue_harm
from councilzoo.theory.stats import mean_ci

__all__ = [
    "ProtocolResult", "costs", "from_escalation", "from_dense", "best_single_in_hindsight", "oracle_gate",
]

FULL_DELIBERATION = ("escalate", "probe_escalate")  # escalation-v0 paths that ran the debate


@dataclass
class ProtocolResult:
    """Per-problem outcomes of one protocol on one problem list (same order for every protocol)."""

    protocol: str
    problem_ids: list[str]
    correct: np.ndarray  # bool (n,)
    anchor_correct: np.ndarray  # bool (n,)
    collab_correct: list[bool | None]
    collaborated: np.ndarray  # bool (n,): e, the final answer came from collaboration
    escalated: np.ndarray  # bool (n,): full deliberation ran (ESCALATE)
    calls: np.ndarray  # float (n,)
    tokens: np.ndarray  # float (n,): decoded tokens
    anchor_cost: np.ndarray | None = None  # (n, 2) calls and decoded tokens of the anchor alone
    oracle: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.problem_ids)
        for name in ("correct", "anchor_correct", "collaborated", "escalated", "calls", "tokens"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"ProtocolResult {self.protocol!r}: {name} has length "
                    f"{len(getattr(self, name))}, expected {n}"
                )

    def summary(self, seed: int = 0) -> dict[str, Any]:
        """The row of the comparison table (rates in [0, 1]; costs per question); each ``*_ci`` is a
        95% percentile bootstrap interval over the problems (rescue and harm resampled together)."""
        acc, lo, hi = mean_ci(self.correct.astype(float), seed=seed)
        calls, calls_lo, calls_hi = mean_ci(self.calls, seed=seed)
        rh = rescue_harm(self.anchor_correct, self.collab_correct, self.collaborated, seed=seed)
        if abs(rh.accuracy - acc) > 1e-12:
            raise AssertionError(f"{self.protocol}: rescue-harm accuracy {rh.accuracy} != {acc}")
        return {
            "protocol": self.protocol,
            "oracle": self.oracle,
            "n": len(self.problem_ids),
            "accuracy": acc,
            "accuracy_ci": [lo, hi],
            "calls": calls,
            "calls_ci": [calls_lo, calls_hi],
            "tokens": float(self.tokens.mean()),
            "anchor_accuracy": rh.anchor_accuracy,
            "rescue": rh.rescue,
            "harm": rh.harm,
            "net": rh.net,
            "rescue_ci": list(rh.ci["rescue"]),
            "harm_ci": list(rh.ci["harm"]),
            "collab_rate": rh.escalation_rate,
            "escalation_rate": float(self.escalated.mean()),
            "counts": rh.counts,
            "note": self.note,
            **self.extra,
        }


def costs(records: Sequence[EpisodeRecord], agent: str | None = None) -> np.ndarray:
    """``(n, 2)``: model calls and decoded tokens per record (of ``agent`` alone if given)."""
    rows = []
    for record in records:
        cost = record.cost if agent is None else record.cost_by_agent.get(agent)
        rows.append((cost.calls, cost.completion_tokens) if cost is not None else (0, 0))
    return np.asarray(rows, dtype=float).reshape(len(records), 2)


def from_escalation(protocol: str, records: Sequence[EpisodeRecord], **kwargs: Any) -> ProtocolResult:
    """Scores of an escalation-v0 run; anchor and collaboration outcomes from each record's info."""
    collaborated = np.array([bool(r.info["escalated"]) for r in records], dtype=bool)
    collab = [bool(r.correct) if e else None for r, e in zip(records, collaborated, strict=True)]
    spent = costs(records)
    return ProtocolResult(
        protocol=protocol,
        problem_ids=[r.problem_id for r in records],
        correct=np.array([bool(r.correct) for r in records]),
        anchor_correct=np.array([bool(r.info["anchor_correct"]) for r in records]),
        collab_correct=collab,
        collaborated=collaborated,
        escalated=np.array([r.info["path"] in FULL_DELIBERATION for r in records], dtype=bool),
        calls=spent[:, 0],
        tokens=spent[:, 1],
        anchor_cost=costs(records, "anchor"),
        **kwargs,
    )


def from_dense(
    protocol: str, records: Sequence[EpisodeRecord], anchor: ProtocolResult, **kwargs: Any
) -> ProtocolResult:
    """Scores of a protocol that collaborates on every problem (dense debate), against ``anchor``."""
    ids = [r.problem_id for r in records]
    if ids != anchor.problem_ids:
        raise ValueError(f"{protocol}: records are not on the anchor run's problems, in its order")
    correct = np.array([bool(r.correct) for r in records])
    spent = costs(records)
    n = len(records)
    return ProtocolResult(
        protocol=protocol,
        problem_ids=ids,
        correct=correct,
        anchor_correct=anchor.correct.copy(),
        collab_correct=correct.tolist(),
        collaborated=np.ones(n, dtype=bool),
        escalated=np.ones(n, dtype=bool),
        calls=spent[:, 0],
        tokens=spent[:, 1],
        **kwargs,
    )


def best_single_in_hindsight(singles: dict[str, ProtocolResult], anchor: ProtocolResult) -> ProtocolResult:
    """ORACLE: the model with the best test accuracy, chosen after seeing the test answers."""
    name = max(singles, key=lambda k: (singles[k].correct.mean(), -singles[k].calls.mean()))
    best = singles[name]
    n = len(best.problem_ids)
    return ProtocolResult(
        protocol="best_single_hindsight",
        problem_ids=best.problem_ids,
        correct=best.correct.copy(),
        anchor_correct=anchor.correct.copy(),
        collab_correct=best.correct.tolist(),
        collaborated=np.ones(n, dtype=bool),
        escalated=np.zeros(n, dtype=bool),
        calls=best.calls.copy(),
        tokens=best.tokens.copy(),
        oracle=True,
        note=f"oracle: {name!r} picked with test labels",
    )


def oracle_gate(gated: ProtocolResult, dense: ProtocolResult) -> ProtocolResult:
    """ORACLE: ``gated``'s anchor, escalating to ``dense`` exactly where that rescues it.

    The collaboration outcome on every problem comes from the dense run (same problems): the
    oracle escalates iff the anchor is wrong and dense debate right (``e = 1[Y_a=0, Y_c=1]``),
    and pays the anchor's cost plus the dense run's cost where it escalates.
    """
    if gated.problem_ids != dense.problem_ids:
        raise ValueError("oracle_gate: the gated and dense runs must cover the same problems in order")
    if gated.anchor_cost is None:
        raise ValueError(f"oracle_gate: {gated.protocol!r} has no per-problem anchor cost")
    e = ~gated.anchor_correct & dense.correct
    return ProtocolResult(
        protocol="oracle_gate",
        problem_ids=gated.problem_ids,
        correct=gated.anchor_correct | dense.correct,
        anchor_correct=gated.anchor_correct.copy(),
        collab_correct=dense.correct.tolist(),
        collaborated=e,
        escalated=e,
        calls=gated.anchor_cost[:, 0] + e * dense.calls,
        tokens=gated.anchor_cost[:, 1] + e * dense.tokens,
        anchor_cost=gated.anchor_cost,
        oracle=True,
        note=f"oracle: escalates to {dense.protocol} exactly when that rescues the {gated.protocol} anchor",
    )
