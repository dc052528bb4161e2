"""The one report format of every ``councilzoo repro`` claim.

A claim module's ``run(out_dir, seeds, quick)`` saves its figures into ``out_dir`` and returns a
``result`` dict; ``write_report(out_dir, result)`` turns it into ``report.json`` (the dict plus
``run_metadata()``) and ``report.md`` (a human-readable page). The dict has exactly these keys:

- ``claim`` (str): the paper's claim in one sentence;
- ``setup`` (dict): what was run (agents, sweep, seeds, sizes), flat values preferred;
- ``results`` (dict): the measured numbers; a value that is a list of flat dicts (rows) is
  rendered as a markdown table, any other value as a line ``key: value``;
- ``verdict`` (dict): ``{"status": "HELD" | "NOT HELD" | "INCONCLUSIVE", "reason": str}``
  (``councilzoo.repro.verdicts``), computed from ``results``, never typed in; a legacy
  ``{"held": bool}`` reads as HELD / NOT HELD. ``write_report`` adds ``held`` (status is HELD);
- ``figures`` (list[str]): file names, relative to ``out_dir``, of the plots ``run`` saved.

Anything else in ``result`` is rejected, so every claim reports in the same shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from councilzoo.config import run_metadata
from councilzoo.repro.verdicts import HELD, NOT_HELD, STATUSES, check_rows, conjunction, describe, part_status

__all__ = ["KEYS", "PIPELINE_CHECK", "save_figure", "combine_parts", "run_sections", "write_report"]

# What a ``--quick`` verdict says first, in the printed line and the report: too few seeds and steps
PIPELINE_CHECK = "PIPELINE CHECK, NOT EVIDENCE (--quick: too few seeds and steps to test the claim). "

KEYS = ("claim", "setup", "results", "verdict", "figures")


def _check(result: dict[str, Any]) -> None:
    if not isinstance(result, dict) or set(result) != set(KEYS):
        got = sorted(result) if isinstance(result, dict) else type(result).__name__
        raise ValueError(f"repro result must be a dict with keys {list(KEYS)}, got {got}")
    verdict = result["verdict"]
    if not (isinstance(verdict, dict) and "reason" in verdict and status_of(verdict) in STATUSES):
        raise ValueError(f"result['verdict'] must be {{'status': one of {list(STATUSES)}, 'reason': str}}, "
                         f"got {verdict!r}")
    if not all(isinstance(f, str) for f in result["figures"]):
        raise ValueError(f"result['figures'] must be a list of file names, got {result['figures']!r}")


def status_of(verdict: dict[str, Any]) -> str | None:
    """A verdict's or part's status: its ``status``, or a legacy ``held`` bool as HELD / NOT HELD."""
    if "status" in verdict:
        return verdict["status"]
    held = verdict.get("held")
    return (HELD if held else NOT_HELD) if isinstance(held, bool) else None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.4g}, {value[1]:.4g}]"  # a confidence interval
    return str(value)


def _is_table(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, dict) for row in value)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Rows of flat dicts as a markdown table; columns in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def _section(title: str, data: dict[str, Any]) -> list[str]:
    lines = [f"## {title}", ""]
    for key, value in data.items():
        if _is_table(value):
            lines += [f"### {key}", "", markdown_table(value), ""]
        else:
            lines.append(f"- {key}: {_cell(value)}")
    return lines + [""]


def render_markdown(result: dict[str, Any], metadata: dict[str, Any]) -> str:
    verdict = result["verdict"]
    lines = [
        f"# Claim: {result['claim']}",
        "",
        f"**Verdict: {status_of(verdict)}.** {verdict['reason']}",
        "",
    ]
    lines += _section("Setup", result["setup"]) + _section("Results", result["results"])
    if result["figures"]:
        lines += ["## Figures", ""] + [f"![{f}]({f})" for f in result["figures"]] + [""]
    lines += ["## Run", ""] + [f"- {k}: {v}" for k, v in metadata.items()]
    return "\n".join(lines) + "\n"


def save_figure(fig: Any, path: str | Path) -> None:
    """How every reproduction's figure ends: laid out tight, saved at 120 dpi, closed."""
    import matplotlib.pyplot as plt  # here, not at the top: the reproductions pick Agg first

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def combine_parts(claim: str, parts: dict[str, dict[str, Any]], setup: dict[str, Any]) -> dict[str, Any]:
    """One result from a claim's parts, each ``{"setup", "results", "checks", "reason", "figures"}``
    with ``checks`` named labelled checks (``verdicts.check``), whose ``verdicts.part_status`` is
    the part's status (a part may give a legacy ``held`` bool instead). The claim's status is the
    three-valued conjunction of its parts'; ``results["parts"]`` keeps each part's status and
    ``results["checks"]`` every check with its kind (precondition, paper or extension)."""
    status = {name: part_status(p["checks"]) if "checks" in p else status_of(p) for name, p in parts.items()}
    return {
        "claim": claim,
        "setup": {k: v for p in parts.values() for k, v in p["setup"].items()} | setup,
        "results": {
            "parts": [{"part": name, "status": status[name], "reason": p["reason"]}
                      for name, p in parts.items()],
            "checks": [row for name, p in parts.items() for row in check_rows(name, p.get("checks", {}))],
            **{k: v for p in parts.values() for k, v in p["results"].items()},
        },
        "verdict": {
            "status": conjunction(status.values()),
            "reason": " ".join(f"[{name}: {status[name]}] "
                               + (describe(p["checks"]) if "checks" in p else p["reason"])
                               for name, p in parts.items()),
        },
        "figures": [f for p in parts.values() for f in p["figures"]],
    }


def run_sections(claim: str, sections: Sequence[tuple[str, Callable[..., dict[str, Any]]]],
                 out_dir: str | Path, seeds: int | None, sizes: dict[str, Any],
                 setup: dict[str, Any]) -> dict[str, Any]:
    """A claim whose parts are independent sections: each ``(name, fn)`` of ``sections`` runs as
    ``fn(out_dir, seeds, sizes)``, in order, into ``out_dir`` (made if missing), and
    ``combine_parts`` joins them under ``claim`` with ``setup``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return combine_parts(claim, {name: fn(out, seeds, sizes) for name, fn in sections}, setup)


def write_report(out_dir: str | Path, result: dict[str, Any],
                 started_at: str | None = None) -> dict[str, Path]:
    """Write ``report.json`` and ``report.md`` for ``result`` into ``out_dir``; return their paths.

    Figures listed in ``result["figures"]`` must already exist in ``out_dir``. ``started_at`` is
    when the run started (UTC, ISO); the seeds are ``result["setup"]["seeds"]`` (0 to n - 1). A
    ``--quick`` result (``setup["quick"]``) is labelled a pipeline check in its verdict.
    """
    _check(result)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    missing = [f for f in result["figures"] if not (out / f).is_file()]
    if missing:
        raise FileNotFoundError(f"figures listed in the result are not in {out}: {missing}")
    seeds = result["setup"].get("seeds")
    metadata = run_metadata(seed=0 if seeds else None,
                            seeds=f"0 to {seeds - 1}" if isinstance(seeds, int) else seeds)
    if started_at is not None:
        metadata["started_at"] = started_at
    paths = {"json": out / "report.json", "markdown": out / "report.md"}
    quick = bool(result["setup"].get("quick"))
    if quick and not result["verdict"]["reason"].startswith(PIPELINE_CHECK):
        result["verdict"]["reason"] = PIPELINE_CHECK + result["verdict"]["reason"]  # the caller prints it too
    status = status_of(result["verdict"])
    result = {**result, "verdict": {"status": status, "held": status == HELD, "evidence": not quick,
                                    **result["verdict"]}}
    paths["json"].write_text(json.dumps({**result, "run": metadata}, indent=2, default=str))
    paths["markdown"].write_text(render_markdown(result, metadata))
    return paths
