"""Three-valued verdicts (HELD, NOT HELD, INCONCLUSIVE), computed from labelled checks.

Every check of a ``councilzoo repro`` part is one of three kinds (``KINDS``):

- ``precondition``: the experiment can test the claim only where it holds (e.g. the members sit in
  the paper's regime). A failed precondition makes the part INCONCLUSIVE, never NOT HELD: the run
  could not test the claim.
- ``paper``: a check of the paper's own claim. Only these decide the part.
- ``extension``: a check of something councilzoo adds to the method (learned gates, label-free
  arms) or of a setting outside the paper's regime; reported beside the verdict, never deciding it.
- ``control``: a fixed policy (never review, always review), or a simpler way of training (the
  proposer trained alone by GRPO at equal compute), put through a paper check's own rule; reported,
  never deciding: when a control passes too, the check does not tell the method apart from it.

A check on an interval (``interval_status``) is HELD when the whole interval lies on the claimed
side of its threshold, NOT HELD when the whole interval lies on the other side of the effect the
paper reports (``refute``; by default the threshold itself), and INCONCLUSIVE otherwise. Every
threshold states its source (``THRESHOLDS``). A part (``part_status``) is INCONCLUSIVE when a
precondition is not HELD, else the three-valued (Kleene) conjunction of its paper checks
(``conjunction``): NOT HELD if any is NOT HELD, HELD if all are HELD, INCONCLUSIVE otherwise, and
INCONCLUSIVE when it has none. A claim is the same conjunction over its parts. No status is ever
typed in: each comes from the measured numbers.

The rules changed twice; ``RULES`` keeps every version with its date, and ``part_status(checks,
rule=...)`` decides under any of them, so a recorded verdict is read under the rule registered
before its run first (``councilzoo.repro.recorded``), and a later rule only as post hoc.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "STATUSES", "KINDS", "RULES", "CURRENT_RULE", "Threshold", "THRESHOLDS", "interval_status", "flag_status",
    "check", "conjunction", "part_status", "describe", "check_rows",
]

HELD, NOT_HELD, INCONCLUSIVE = "HELD", "NOT HELD", "INCONCLUSIVE"
STATUSES = (HELD, NOT_HELD, INCONCLUSIVE)
KINDS = ("precondition", "paper", "extension", "control")

# Every version of the rules, by the date it was registered (committed), and what it says.
RULES = {
    "2026-12-02": "every check decides, a failed precondition included (NOT HELD); intervals are "
                  "percentile bootstraps over seeds; a check without an interval compares seed means",
    "2026-12-06": "checks labelled precondition / paper / extension: a failed precondition makes a part "
                  "INCONCLUSIVE, only paper checks decide; intervals still percentile bootstraps over seeds",
    "2026-12-07": "as 2026-12-06, and: every interval that decides is over seeds (the training run is the "
                  "unit: a t interval, or a two-level bootstrap where items vary too); NOT HELD needs that "
                  "interval to exclude the paper's own effect (THRESHOLDS), HELD to exclude no effect",
}
CURRENT_RULE = "2026-12-07"


@dataclass(frozen=True)
class Threshold:
    """A decision threshold in accuracy points (a fraction) and where its value comes from."""

    value: float
    source: str


THRESHOLDS = {
    "corl_over_ttrl": Threshold(0.01, "Co-RL's own edge over TTRL: about +1 point on average over seven "
                                      "text benchmarks (same family -0.4 to +1.4, different family +0.6 to "
                                      "+1.4; the Co-RL release's results table)"),
    "corl_over_base": Threshold(0.03, "Co-RL's abstract: average gains of 3.0-8.6% over the base models "
                                      "across seven text benchmarks (the lower end)"),
    "comed_over_anchor": Threshold(0.0, "COMED's abstract: COMED improves fixed and routed anchors in all "
                                        "16 open-weight settings (gains up to +10.7 points); the sign is the "
                                        "claim, so no gain or a loss refutes it"),
    "non_inferiority": Threshold(-0.02, "councilzoo's stated non-inferiority margin for 'at least as good' "
                                        "(2 points of accuracy, or of accuracy - lambda * calls): neither "
                                        "COMED's nor TRACER's abstract gives a margin"),
}


def interval_status(lo: float | None, hi: float | None, threshold: float = 0.0, *, above: bool = True,
                    refute: float | None = None) -> str:
    """HELD when ``[lo, hi]`` lies strictly above ``threshold`` (below, with ``above=False``), NOT
    HELD when it lies strictly on the other side of ``refute`` (the paper's own effect, excluded;
    by default ``threshold``), else INCONCLUSIVE: both ends strict, so the rule is symmetric. A
    missing or NaN end (one seed, nothing measured) is INCONCLUSIVE."""
    if lo is None or hi is None or lo != lo or hi != hi:
        return INCONCLUSIVE
    if lo > hi:
        raise ValueError(f"interval ends must satisfy lo <= hi, got [{lo}, {hi}]")
    refute = threshold if refute is None else refute
    if not above:
        lo, hi, threshold, refute = -hi, -lo, -threshold, -refute
    if refute < threshold:
        raise ValueError(f"the refuted effect {refute} must lie on the claimed side of threshold {threshold}")
    if lo > threshold:
        return HELD
    if hi < refute:
        return NOT_HELD
    return INCONCLUSIVE


def flag_status(ok: bool | None) -> str:
    """A check without sampling noise (an exact count or a deterministic quantity): HELD or NOT
    HELD; None (not measured) is INCONCLUSIVE."""
    return INCONCLUSIVE if ok is None else (HELD if ok else NOT_HELD)


def check(kind: str, status: str, rule: str, value: Any = None) -> dict[str, Any]:
    """One labelled check: ``kind`` in ``KINDS``, ``status`` in ``STATUSES``, the ``rule`` in words
    and the measured ``value`` (a number, ``[mean, lo, hi]``, or anything printable)."""
    if kind not in KINDS:
        raise ValueError(f"check kind must be one of {list(KINDS)}, got {kind!r}")
    if status not in STATUSES:
        raise ValueError(f"check status must be one of {list(STATUSES)}, got {status!r}")
    return {"kind": kind, "status": status, "rule": rule, "value": value}


def conjunction(statuses: Iterable[str]) -> str:
    """Three-valued AND: NOT HELD if any is, HELD if all are (and there is at least one), else
    INCONCLUSIVE."""
    statuses = list(statuses)
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise ValueError(f"unknown statuses {bad}; expected some of {list(STATUSES)}")
    if NOT_HELD in statuses:
        return NOT_HELD
    return HELD if statuses and all(s == HELD for s in statuses) else INCONCLUSIVE


def part_status(checks: Mapping[str, Mapping[str, Any]], rule: str = CURRENT_RULE) -> str:
    """A part's status from its named checks under the rule of date ``rule`` (``RULES``): before
    2026-12-06 the conjunction of every check; since, see the module docstring."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; rules are dated {list(RULES)}")
    if rule < "2026-12-06":
        return conjunction(c["status"] for c in checks.values())
    if any(c["status"] != HELD for c in checks.values() if c["kind"] == "precondition"):
        return INCONCLUSIVE
    return conjunction(c["status"] for c in checks.values() if c["kind"] == "paper")


def describe(checks: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per part: each check's kind, status, rule and value."""

    def value(v: Any) -> str:
        if isinstance(v, (list, tuple)) and len(v) == 3 and isinstance(v[0], float):
            if any(x is None or x != x for x in v[1:]):
                return f"mean {v[0]:+.3f}, no interval (one seed)"
            return f"mean {v[0]:+.3f}, CI [{v[1]:+.3f}, {v[2]:+.3f}]"
        return f"{v:+.3f}" if isinstance(v, float) else str(v)

    return "; ".join(f"{name} ({c['kind']}): {c['status']} ({c['rule']}: {value(c['value'])})"
                     for name, c in checks.items())


def check_rows(part: str, checks: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The checks as table rows (``report.markdown_table``)."""
    rows = []
    for name, c in checks.items():
        v = c["value"]
        interval = isinstance(v, (list, tuple)) and len(v) == 3
        rows.append({"part": part, "check": name, "kind": c["kind"], "status": c["status"],
                     "value": v[0] if interval else v,
                     "ci": (v[1], v[2]) if interval else "", "rule": c["rule"]})
    return rows
