"""``councilzoo repro comed``: selective escalation beats dense collaboration at lower cost,
because it avoids harm.

COMED's claim (REFERENCE.md section 3) at toy scale. The rescue-harm identity
``Acc - Acc_anchor = Rescue - Harm`` says dense collaboration helps only while the rescues it
brings exceed the harms it does; a gate that escalates selectively keeps the rescues and avoids
most harms. We sweep the peers' harm propensity (``swayed_prob``: the chance a peer holding a
right answer adopts a wrong one shown to it) on the demo council (``DEMO_COUNCIL``, simulated
agents on synthetic numeric problems), over several seeds, and measure:

- accuracy, model invocations and decoded tokens per question of the anchor alone (``single``),
  self-consistency, routing, dense debate and COMED (thresholds fitted on a dev split per seed);
- the rescue-harm decomposition of dense debate and of COMED;
- the harm level at which dense debate starts to lose to the anchor alone;
- the accuracy-cost frontier at the most harm-prone level.

Verdict (computed): the claim holds when, at every harm level, COMED's mean accuracy is at least
dense debate's while it makes fewer invocations and decodes fewer tokens, and its harm rate is
below debate's.

Sections: the result is assembled from sections (``SECTIONS``); ``simulated`` is the one above.
A tiny-LM section (real tiny language models of different skill, ``councilzoo.repro.tiny_lms``)
plugs in as another ``(name, function)`` entry returning the same kind of dict.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from councilzoo.config import load_config  # noqa: E402
from councilzoo.evaluation.council import CouncilConfig  # noqa: E402
from councilzoo.evaluation.demo import DEMO_COUNCIL  # noqa: E402
from councilzoo.evaluation.harness import Evaluation  # noqa: E402
from councilzoo.evaluation.report import frontier_plot  # noqa: E402
from councilzoo.tasks import synthetic_problems  # noqa: E402
from councilzoo.theory.stats import mean_ci  # noqa: E402

CLAIM = "Selective escalation (COMED) beats dense collaboration at lower cost, because it avoids harm."
PROTOCOLS = ("single", "self_consistency", "routing", "debate", "comed")
COLORS = {
    "single": "tab:blue",
    "self_consistency": "tab:orange",
    "routing": "tab:green",
    "debate": "tab:red",
    "comed": "tab:purple",
}
METRICS = ("accuracy", "calls", "tokens", "rescue", "harm", "net", "escalation_rate")
FULL = {"levels": (0.0, 0.15, 0.3, 0.45, 0.6), "seeds": 3, "test": 200, "dev": 200}
QUICK = {"levels": (0.0, 0.3, 0.6), "seeds": 2, "test": 80, "dev": 100}


def council_at(swayed: float, seed: int, dev_size: int) -> CouncilConfig:
    """The demo council with every peer's ``swayed_prob`` set to ``swayed``, model seeds shifted."""
    cfg = copy.deepcopy(DEMO_COUNCIL)
    for name, spec in cfg["models"].items():
        spec["kwargs"]["seed"] = spec["kwargs"].get("seed", 0) + 100 * seed
        if name in cfg["peers"]:
            spec["kwargs"]["swayed_prob"] = swayed
    cfg["comed"] = {**cfg["comed"], "dev_size": dev_size}
    return load_config(cfg, CouncilConfig)


def run_cell(swayed: float, seed: int, n_test: int, n_dev: int) -> dict[str, dict[str, Any]]:
    """One (harm level, seed): each protocol's summary row, by protocol."""
    council = council_at(swayed, seed, n_dev)
    test = synthetic_problems("numeric", n_test, seed=seed)
    dev = synthetic_problems("numeric", n_dev, seed=seed + 10_000)
    ev = Evaluation(council, test, dev, progress=False, seed=seed)
    return {row["protocol"]: row for row in ev.rows(PROTOCOLS)}


def _aggregate(cells: list[dict[str, dict[str, Any]]], protocol: str) -> dict[str, Any]:
    """Mean and 95% bootstrap CI over seeds of each metric of ``protocol``."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        mean, lo, hi = mean_ci([c[protocol][metric] for c in cells])
        out[metric], out[f"{metric}_ci"] = mean, [lo, hi]
    out["accuracy_ci_seeds"] = out["accuracy_ci"]
    return out


def _crossover(levels: list[float], table: dict[float, dict[str, dict]]) -> float | None:
    """The harm level at which dense debate's mean accuracy falls to the anchor's (linear
    interpolation between the first grid level where it is below and the one before)."""
    gap = [table[lv]["debate"]["accuracy"] - table[lv]["single"]["accuracy"] for lv in levels]
    for i, g in enumerate(gap):
        if g < 0:
            if i == 0:
                return levels[0]
            return levels[i - 1] + (levels[i] - levels[i - 1]) * gap[i - 1] / (gap[i - 1] - g)
    return None


def _plot_sweep(levels: list[float], table: dict, path: Path) -> None:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for protocol in PROTOCOLS:
        acc = np.array([table[lv][protocol]["accuracy"] for lv in levels])
        ci = np.array([table[lv][protocol]["accuracy_ci"] for lv in levels])
        ax1.plot(levels, acc, "o-", color=COLORS[protocol], label=protocol)
        ax1.fill_between(levels, ci[:, 0], ci[:, 1], color=COLORS[protocol], alpha=0.15)
    ax1.set_xlabel("peers' swayed_prob (harm propensity)")
    ax1.set_ylabel("accuracy (mean over seeds, 95% CI)")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    for protocol in ("debate", "comed"):
        color = COLORS[protocol]
        ax2.plot(
            levels,
            [table[lv][protocol]["rescue"] for lv in levels],
            "o-",
            color=color,
            label=f"{protocol} rescue",
        )
        ax2.plot(
            levels,
            [-table[lv][protocol]["harm"] for lv in levels],
            "s--",
            color=color,
            label=f"{protocol} -harm",
        )
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xlabel("peers' swayed_prob (harm propensity)")
    ax2.set_ylabel("share of questions")
    ax2.set_title("Rescue (up) and harm (down), each against its own anchor")
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def simulated(out_dir: Path, seeds: int, sizes: dict[str, Any]) -> dict[str, Any]:
    """The simulated sweep: rows per (level, protocol), crossover, frontier, figures, checks."""
    levels = list(sizes["levels"])
    table: dict[float, dict[str, dict]] = {}
    for level in levels:
        cells = [run_cell(level, seed, sizes["test"], sizes["dev"]) for seed in range(seeds)]
        table[level] = {p: _aggregate(cells, p) for p in PROTOCOLS}
    _plot_sweep(levels, table, out_dir / "sweep.png")
    worst = levels[-1]
    frontier_rows = [{"protocol": p, "oracle": False, **table[worst][p]} for p in PROTOCOLS]
    frontier_plot(frontier_rows, out_dir / "frontier.png")
    rows = [
        {
            "swayed_prob": lv,
            "protocol": p,
            **{m: table[lv][p][m] for m in METRICS},
            "accuracy_ci": table[lv][p]["accuracy_ci"],
        }
        for lv in levels
        for p in PROTOCOLS
    ]
    checks = []
    for lv in levels:
        c, d = table[lv]["comed"], table[lv]["debate"]
        checks.append(
            {
                "swayed_prob": lv,
                "comed_acc_minus_debate": c["accuracy"] - d["accuracy"],
                "calls_ratio": c["calls"] / d["calls"],
                "tokens_ratio": c["tokens"] / d["tokens"],
                "comed_harm": c["harm"],
                "debate_harm": d["harm"],
                "held": bool(
                    c["accuracy"] >= d["accuracy"]
                    and c["calls"] < d["calls"]
                    and c["tokens"] < d["tokens"]
                    and c["harm"] < d["harm"]
                ),
            }
        )
    return {
        "rows": rows,
        "checks": checks,
        "dense_loses_to_anchor_from_swayed_prob": _crossover(levels, table),
        "figures": ["sweep.png", "frontier.png"],
    }


SECTIONS = (("simulated", simulated),)


def run(out_dir: str | Path, seeds: int | None = None, quick: bool = False) -> dict[str, Any]:
    """Run every section into ``out_dir``; the result dict of ``councilzoo.repro.report``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = QUICK if quick else FULL
    seeds = seeds or sizes["seeds"]
    sections = {name: fn(out_dir, seeds, sizes) for name, fn in SECTIONS}
    sim = sections["simulated"]
    failed = [c["swayed_prob"] for c in sim["checks"] if not c["held"]]
    cross = sim["dense_loses_to_anchor_from_swayed_prob"]
    cross_text = (
        f"dense debate falls below the anchor alone from swayed_prob ~ {cross:.2f}"
        if cross is not None
        else "dense debate never fell below the anchor alone in this sweep"
    )
    if failed:
        reason = (
            f"COMED missed 'accuracy >= debate at lower cost with less harm' at swayed_prob {failed}; "
            f"{cross_text}."
        )
    else:
        worst = sim["checks"][-1]
        reason = (
            f"at every harm level COMED matched or beat dense debate's accuracy with less harm, "
            f"using {worst['calls_ratio']:.2f}x its invocations and {worst['tokens_ratio']:.2f}x its tokens "
            f"at the most harm-prone level; {cross_text}."
        )
    return {
        "claim": CLAIM,
        "setup": {
            "council": "councilzoo.evaluation.demo.DEMO_COUNCIL (simulated)",
            "swept": "peers' swayed_prob",
            "levels": list(sizes["levels"]),
            "seeds": seeds,
            "test_problems": sizes["test"],
            "dev_problems": sizes["dev"],
            "protocols": list(PROTOCOLS),
            "quick": quick,
        },
        "results": {
            "sweep": sim["rows"],
            "checks": sim["checks"],
            "dense_loses_to_anchor_from_swayed_prob": cross,
        },
        "verdict": {"held": not failed, "reason": reason},
        "figures": [f for s in sections.values() for f in s["figures"]],
    }
