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

__all__ = [
    "COLUMNS", "pareto_frontier", "table_cells", "markdown", "frontier_plot", "frontier_figure",
    "text_box", "rescue_harm_plot", "write",
]

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
    fig = frontier_figure(rows)
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def frontier_figure(rows: Sequence[dict[str, Any]]) -> Any:
    """The figure of ``frontier_plot``: protocol labels placed so that none overlaps another."""
    fig, axes = plt.subplots(1, len(COST_KEYS), figsize=(6 * len(COST_KEYS), 4.5), dpi=120)
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
    for ax, cost in zip(axes, COST_KEYS, strict=True):
        _place_labels(ax, [(_label(r), (r[cost], r["accuracy"])) for r in rows])
    return fig


# Offsets (points) tried in turn for a label beside its point: up-right first, then further up or
# down, then on the left; the first inside the axes that overlaps no label placed before wins.
_NEAR = 5
_STEPS = (0, -16, 10, -26, 20, -36, 30, -46, 40, -56, 50)


def _place_labels(ax: Any, labels: Sequence[tuple[str, tuple[float, float]]], fontsize: int = 8) -> list:
    """Annotate each ``(text, (x, y))`` point of ``ax`` with its text where it overlaps no other
    label, inside the axes where it can (greedy, highest point first); a label moved off its
    corner gets a thin leader line."""
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    order = sorted(range(len(labels)), key=lambda i: -labels[i][1][1])
    placed, out = [], [None] * len(labels)
    for i in order:
        text, xy = labels[i]
        ann = ax.annotate(text, xy, textcoords="offset points", xytext=(_NEAR, _NEAR), fontsize=fontsize)
        width = text_box(ann, renderer).width * 72 / ax.figure.dpi
        offsets = [(dx, _NEAR + dy) for dx in (_NEAR, -_NEAR - width) for dy in _STEPS]

        def fits(offset: tuple[float, float], inside: bool, ann=ann) -> bool:
            ann.xyann = offset
            box = text_box(ann, renderer)
            within = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            return (within or not inside) and not any(box.overlaps(other) for other in placed)

        ann.xyann = next(
            (o for o in offsets if fits(o, inside=True)),
            next((o for o in offsets if fits(o, inside=False)), offsets[-1]),
        )
        if ann.xyann != (_NEAR, _NEAR):
            ann.remove()
            ann = ax.annotate(
                text, xy, textcoords="offset points", xytext=ann.xyann, fontsize=fontsize,
                arrowprops=dict(arrowstyle="-", lw=0.5, color="0.5"),
            )
        placed.append(text_box(ann, renderer))
        out[i] = ann
    return out


def text_box(ann: Any, renderer: Any) -> Any:
    """The display box of an annotation's text alone (``get_window_extent`` adds its leader line)."""
    from matplotlib.text import Text

    ann.update_positions(renderer)  # the text's place follows its offset only once updated
    return Text.get_window_extent(ann, renderer)


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


def _weaker_sandbox_note(meta: dict[str, Any]) -> str:
    """A line for a run whose code sandbox accepted weaker isolation (``run_metadata``'s choice)."""
    if not meta.get("sandbox", {}).get("accept_weaker_isolation"):
        return ""
    return (
        "\n**Code sandbox: weaker isolation accepted** (COUNCILZOO_SANDBOX_ACCEPT_WEAKER=1): where the "
        "kernel lacked an isolation layer, graded programs ran without it.\n"
    )


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
        + _weaker_sandbox_note(meta)
    )
    paths["markdown"].write_text(doc)
    protocols = {r["protocol"]: r for r in rows}
    paths["json"].write_text(
        json.dumps({"protocols": protocols, "frontier": frontier, "run": meta}, indent=2, default=str)
    )
    return paths
