"""Three-valued verdicts (HELD, NOT HELD, INCONCLUSIVE), computed from labelled checks.

Every check of a ``councilzoo repro`` part is one of three kinds (``KINDS``):

- ``precondition``: the experiment can test the claim only where it holds (e.g. the members sit in
  the paper's regime). A failed precondition makes the part INCONCLUSIVE, never NOT HELD: the run
  could not test the claim.
- ``paper``: a check of the paper's own claim. Only these decide the part.
- ``extension``: a check of something councilzoo adds to the method (learned gates, label-free
  arms) or of a setting outside the paper's regime; reported beside the verdict, never deciding it.

A check on an interval (``interval_status``) is HELD when the whole interval lies on the claimed
side of its threshold, NOT HELD when the whole interval lies on the other side, and INCONCLUSIVE
when the interval spans the threshold. A part (``part_status``) is INCONCLUSIVE when a
precondition is not HELD, else the three-valued (Kleene) conjunction of its paper checks
(``conjunction``): NOT HELD if any is NOT HELD, HELD if all are HELD, INCONCLUSIVE otherwise, and
INCONCLUSIVE when it has none. A claim is the same conjunction over its parts. No status is ever
typed in: each comes from the measured numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "STATUSES", "KINDS", "interval_status", "flag_status", "check", "conjunction", "part_status",
    "describe", "check_rows",
]

HELD, NOT_HELD, INCONCLUSIVE = "HELD", "NOT HELD", "INCONCLUSIVE"
STATUSES = (HELD, NOT_HELD, INCONCLUSIVE)
KINDS = ("precondition", "paper", "extension")


def interval_status(lo: float, hi: float, threshold: float = 0.0, *, above: bool = True) -> str:
    """HELD when ``[lo, hi]`` lies strictly above ``threshold`` (below, with ``above=False``),
    NOT HELD when it lies entirely on the other side (touching counts as not past it), else
    INCONCLUSIVE. A NaN end (nothing measured) is INCONCLUSIVE."""
    if lo != lo or hi != hi:
        return INCONCLUSIVE
    if lo > hi:
        raise ValueError(f"interval ends must satisfy lo <= hi, got [{lo}, {hi}]")
    if not above:
        lo, hi, threshold = -hi, -lo, -threshold
    if lo > threshold:
        return HELD
    if hi <= threshold:
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


def part_status(checks: Mapping[str, Mapping[str, Any]]) -> str:
    """A part's status from its named checks (see the module docstring)."""
    if any(c["status"] != HELD for c in checks.values() if c["kind"] == "precondition"):
        return INCONCLUSIVE
    return conjunction(c["status"] for c in checks.values() if c["kind"] == "paper")


def describe(checks: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per part: each check's kind, status, rule and value."""

    def value(v: Any) -> str:
        if isinstance(v, (list, tuple)) and len(v) == 3 and all(isinstance(x, float) for x in v):
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
