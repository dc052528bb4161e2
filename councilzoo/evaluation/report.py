"""Comparison tables and plots of protocol results: markdown, JSON, accuracy-cost frontier, rescue/harm.

Rows are ``ProtocolResult.summary()`` dicts. Oracle rows (``row["oracle"]``) are drawn hollow and
never take part in the frontier: they use test labels no deployable protocol has.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COST_KEYS = {"calls": "model invocations / question", "tokens": "decoded tokens / question"}
COLUMNS = ("accuracy", "95% CI", "calls/q", "tokens/q", "anchor acc", "rescue", "harm", "net", "escalation")


def pareto_frontier(rows: Sequence[dict[str, Any]], cost: str = "tokens") -> list[str]:
    """Protocols (non-oracle) that no other non-oracle protocol beats on accuracy at no more cost.

    Returned in order of increasing cost; ties in both coordinates are all kept.
    """
    candidates = [r for r in rows if not r["oracle"]]
    on = []
    for r in candidates:
        dominated = any(
            o["accuracy"] >= r["accuracy"]
            and o[cost] <= r[cost]
            and (o["accuracy"] > r["accuracy"] or o[cost] < r[cost])
            for o in candidates
        )
        if not dominated:
            on.append(r)
    return [r["protocol"] for r in sorted(on, key=lambda r: r[cost])]


def table_cells(row: dict[str, Any]) -> list[str]:
    lo, hi = row["accuracy_ci"]
    return [
        f"{row['accuracy']:.3f}",
        f"[{lo:.3f}, {hi:.3f}]",
        f"{row['calls']:.2f}",
        f"{row['tokens']:.0f}",
        f"{row['anchor_accuracy']:.3f}",
        f"{row['rescue']:.3f}",
        f"{row['harm']:.3f}",
        f"{row['net']:+.3f}",
        f"{row['escalation_rate']:.2f}",
    ]


def _label(row: dict[str, Any]) -> str:
    return f"{row['protocol']} (oracle)" if row["oracle"] else row["protocol"]


def markdown(rows: Sequence[dict[str, Any]], title: str = "Protocol comparison") -> str:
    """The comparison table (plus each row's note) as markdown."""
    header = "| protocol | " + " | ".join(COLUMNS) + " |"
    lines = [f"# {title}", "", header, "|---" * (len(COLUMNS) + 1) + "|"]
    lines += ["| " + " | ".join([_label(r), *table_cells(r)]) + " |" for r in rows]
    notes = [f"- **{r['protocol']}**: {r['note']}" for r in rows if r.get("note")]
    lines += ["", "rescue - harm = accuracy - anchor accuracy exactly (COMED's decomposition).", ""]
    return "\n".join(lines + notes) + "\n"


def frontier_plot(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Accuracy (95% CI bars) against cost, one panel per cost unit, frontier drawn as a line."""
    fig, axes = plt.subplots(1, len(COST_KEYS), figsize=(6 * len(COST_KEYS), 4.5))
    for ax, (cost, label) in zip(axes, COST_KEYS.items(), strict=True):
        for r in rows:
            lo, hi = r["accuracy_ci"]
            style = dict(mfc="none") if r["oracle"] else {}
            ax.errorbar(
                r[cost],
                r["accuracy"],
                yerr=[[r["accuracy"] - lo], [hi - r["accuracy"]]],
                fmt="o",
                capsize=3,
                **style,
            )
            ax.annotate(
                _label(r), (r[cost], r["accuracy"]), textcoords="offset points", xytext=(5, 5), fontsize=8
            )
        names = pareto_frontier(rows, cost)
        front = sorted((r for r in rows if r["protocol"] in names), key=lambda r: r[cost])
        ax.plot(
            [r[cost] for r in front],
            [r["accuracy"] for r in front],
            "k--",
            lw=1,
            label="frontier (non-oracle)",
        )
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("Accuracy-cost frontier (hollow: oracles)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def rescue_harm_plot(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Rescue (up) and harm (down) per protocol against its anchor, with the net change marked."""
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4))
    xs = range(len(rows))
    ax.bar(xs, [r["rescue"] for r in rows], color="tab:green", label="rescue")
    ax.bar(xs, [-r["harm"] for r in rows], color="tab:red", label="harm")
    ax.scatter(xs, [r["net"] for r in rows], color="k", zorder=3, label="net = accuracy - anchor accuracy")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(list(xs), [_label(r) for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("share of questions")
    ax.legend(fontsize=8)
    ax.set_title("Rescue-harm decomposition")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(
    rows: Sequence[dict[str, Any]], out: str | Path, meta: dict[str, Any], title: str = "Protocol comparison"
) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``frontier.png`` and ``rescue_harm.png`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "frontier": frontier_plot(rows, out / "frontier.png"),
        "rescue_harm": rescue_harm_plot(rows, out / "rescue_harm.png"),
        "markdown": out / "report.md",
        "json": out / "report.json",
    }
    frontier = {cost: pareto_frontier(rows, cost) for cost in COST_KEYS}
    doc = (
        markdown(rows, title)
        + "\n## Frontier (non-oracle)\n\n"
        + "".join(f"- {COST_KEYS[c]}: {' -> '.join(names)}\n" for c, names in frontier.items())
        + "\n![frontier](frontier.png)\n![rescue-harm](rescue_harm.png)\n"
    )
    paths["markdown"].write_text(doc)
    protocols = {r["protocol"]: r for r in rows}
    paths["json"].write_text(
        json.dumps({"protocols": protocols, "frontier": frontier, "run": meta}, indent=2, default=str)
    )
    return paths
