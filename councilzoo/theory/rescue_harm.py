"""COMED's rescue-harm decomposition of an escalation gate, with bootstrap intervals.

With ``Y_a, Y_c`` in {0, 1} the anchor's and the collaboration's correctness and ``e`` in {0, 1}
the gate's escalation decision, the final answer is correct iff ``Y = (1 - e) Y_a + e Y_c``, so
(an exact identity, checked item by item in counts):

    Acc - Acc_anchor = P(e=1, Y_a=0, Y_c=1) - P(e=1, Y_a=1, Y_c=0) = Rescue - Harm.

Selective escalation beats dense escalation iff the harms it avoids exceed the rescues it
forgoes. The oracle gate escalates exactly when ``Y_a = 0`` and ``Y_c = 1``; its accuracy is
``P(Y_a = 1 or Y_c = 1)``.

Unknown collaboration outcomes: ``collab_correct[i]`` may be None where the collaboration was not
run, which is allowed only where ``escalated[i] = 0``. The oracle gate then uses only the known
entries: it keeps the anchor where ``Y_c`` is unknown, so ``oracle_gate_accuracy`` is a lower
bound on the true oracle's accuracy (equal to it when every ``Y_c`` is known).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from councilzoo.theory.stats import bootstrap_indices, percentile_interval

__all__ = ["RescueHarm", "rescue_harm"]

FIELDS = ("anchor_accuracy", "accuracy", "rescue", "harm", "net", "escalation_rate", "oracle_gate_accuracy")


@dataclass(frozen=True)
class RescueHarm:
    """Rates over ``n`` items; ``counts`` holds the integer numerators (exact identity:
    ``counts["rescue"] - counts["harm"] == counts["accuracy"] - counts["anchor_accuracy"]``);
    ``ci[name] = (lo, hi)`` is the percentile bootstrap interval of each rate."""

    n: int
    anchor_accuracy: float
    accuracy: float
    rescue: float
    harm: float
    net: float
    escalation_rate: float
    oracle_gate_accuracy: float
    counts: dict[str, int]
    ci: dict[str, tuple[float, float]]


def _binary(name: str, values, n: int | None = None) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or (n is not None and len(array) != n):
        raise ValueError(f"{name} must be a 1-D sequence of length {n or 'n'}, got shape {array.shape}")
    if not np.all(np.isin(array, (0, 1))):
        raise ValueError(f"{name} must hold only 0/1 (or booleans)")
    return array.astype(np.int64)


def _indicators(anchor: np.ndarray, collab: np.ndarray, known: np.ndarray, escalated: np.ndarray):
    """Per-item 0/1 indicators of each counted event, stacked in ``FIELDS`` order (net: +1/-1)."""
    rescue = escalated * (1 - anchor) * collab
    harm = escalated * anchor * (1 - collab)
    final = (1 - escalated) * anchor + escalated * collab
    oracle = np.maximum(anchor, collab * known)
    return np.stack([anchor, final, rescue, harm, rescue - harm, escalated, oracle])


def rescue_harm(anchor_correct, collab_correct, escalated, *, n_boot: int = 1000, seed: int = 0,
                level: float = 0.95) -> RescueHarm:
    """Decompose the accuracy change of an escalation gate into rescue and harm (see module doc)."""
    anchor = _binary("anchor_correct", anchor_correct)
    n = len(anchor)
    if n == 0:
        raise ValueError("rescue_harm needs at least one item, got none")
    escalated = _binary("escalated", escalated, n)
    collab_list = list(collab_correct)
    if len(collab_list) != n:
        raise ValueError(f"collab_correct must have length {n}, got {len(collab_list)}")
    known = np.array([c is not None for c in collab_list], dtype=np.int64)
    unknown_escalated = np.flatnonzero(escalated & (1 - known))
    if unknown_escalated.size:
        raise ValueError(f"collab_correct is None at escalated items {unknown_escalated[:10].tolist()}: "
                         "an escalated item needs the collaboration's outcome")
    collab = _binary("collab_correct", [0 if c is None else int(c) for c in collab_list], n)

    per_item = _indicators(anchor, collab, known, escalated)
    sums = per_item.sum(axis=1)
    resamples = bootstrap_indices(n, n_boot, seed)  # the same resamples for every field (paired)
    boot = [row.astype(np.int8)[resamples].mean(axis=1) for row in per_item]
    return RescueHarm(
        n=n,
        **{name: float(total / n) for name, total in zip(FIELDS, sums, strict=True)},
        counts={name: int(total) for name, total in zip(FIELDS, sums, strict=True)},
        ci={name: percentile_interval(samples, level) for name, samples in zip(FIELDS, boot, strict=True)},
    )
