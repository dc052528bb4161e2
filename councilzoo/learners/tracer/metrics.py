"""TRACER's metrics: accuracy, cost, correction / preservation / harmful flips, speak rates, regret.

Definitions (per batch of finished review-v0 episodes; the events come from the env's infos,
which compare the first pending proposal with the final answer):

- ``accuracy``: share of episodes whose final answer is right; ``objective`` = accuracy - lam *
  mean cost (the team reward the controllers maximise);
- ``calls_per_question`` / ``tokens_per_question``: mean model calls / tokens per episode;
- ``first_proposal_accuracy``: share of episodes whose first proposal is right (what the
  utterance layer trains; the controllers cannot change it);
- ``correction_rate``: P(final right | first proposal wrong);
- ``preservation_rate``: P(final right | first proposal right);
- ``harmful_flip_rate``: P(final wrong | first proposal right) = 1 - preservation rate;
  ``harmful_flips_per_question``: harmful flips / episodes;
- ``speak_rate``: per role and information state, the share of decisions that spoke (REFRESH /
  SPEAK), with the number of decisions;
- regret: per role and state, cumulative external regret against ``Delta * sqrt(2 T)`` (T = the
  state's number of updates), from ``RegretMatchingController.report``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from councilzoo.envs.types import EpisodeRecord

__all__ = ["episode_metrics", "speak_rates", "regret_summary", "flatten"]


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def episode_metrics(records: Sequence[EpisodeRecord], lam: float = 0.0, cost_unit: str = "calls") -> dict:
    """Accuracy, cost and correction metrics of ``records`` (graded episodes only)."""
    graded = [r for r in records if r.correct is not None]
    n = len(graded)
    if n == 0:
        return {"episodes": len(records), "graded": 0}
    correct = np.array([bool(r.correct) for r in graded])
    calls = np.array([r.cost.calls for r in graded], float)
    tokens = np.array([r.cost.tokens for r in graded], float)
    spent = calls if cost_unit == "calls" else tokens
    events = [r.info for r in graded if r.info.get("correction") is not None]
    first_right = [e for e in events if e["preservation"] or e["harmful_flip"]]
    first_wrong = [e for e in events if not (e["preservation"] or e["harmful_flip"])]
    harmful = sum(bool(e["harmful_flip"]) for e in events)
    return {
        "episodes": len(records),
        "graded": n,
        "accuracy": float(correct.mean()),
        "objective": float(correct.mean() - lam * spent.mean()),
        "calls_per_question": float(calls.mean()),
        "tokens_per_question": float(tokens.mean()),
        "first_proposal_accuracy": _rate(len(first_right), len(events)),
        "correction_rate": _rate(sum(bool(e["correction"]) for e in first_wrong), len(first_wrong)),
        "preservation_rate": _rate(sum(bool(e["preservation"]) for e in first_right), len(first_right)),
        "harmful_flip_rate": _rate(harmful, len(first_right)),
        "harmful_flips_per_question": harmful / n,
    }


def speak_rates(decisions: Sequence, state_names: Sequence[str]) -> dict[str, dict[str, dict]]:
    """``{role: {state name: {"speak_rate", "decisions"}}}`` over ``decisions`` (``Decision`` rows)."""
    counts: dict[tuple[str, int], list[int]] = {}
    for d in decisions:
        c = counts.setdefault((d.role, d.state), [0, 0])
        c[0] += d.action
        c[1] += 1
    out: dict[str, dict[str, dict]] = {}
    for (role, state), (spoke, total) in sorted(counts.items()):
        out.setdefault(role, {})[state_names[state]] = {"speak_rate": spoke / total, "decisions": total}
    return out


def regret_summary(rows: Sequence[dict]) -> dict:
    """Worst regret-to-bound ratio and the states above their bound (should be none)."""
    ratios = [r["regret"] / r["bound"] for r in rows if r["bound"] > 0]
    over = [f"{r['role']}:{r['state']}" for r in rows if r["regret"] > r["bound"] + 1e-9]
    return {
        "max_regret_over_bound": max(ratios, default=0.0),
        "states_over_bound": over,
        "states_trained": len(rows),
    }


def flatten(metrics: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested ``metrics`` as ``{"a/b/c": value}`` (for ``MetricsLogger``).

    Regret rows become ``regret/<role>/<state>/<field>``; None, strings and lists of names drop.
    """
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}/"))
        elif isinstance(value, list) and value and all(isinstance(r, dict) and "role" in r for r in value):
            for row in value:
                fields = {k: v for k, v in row.items() if k not in ("role", "state")}
                flat.update(flatten(fields, f"{name}/{row['role']}/{row['state']}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat
