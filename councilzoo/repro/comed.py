"""``councilzoo repro comed``: selective escalation beats dense collaboration at lower cost,
because it avoids harm.

COMED's claim (docs/comed.md) at toy scale. The rescue-harm identity
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

Tiny-LM part (``tiny_lm``): the same protocols with real language models of different skill,
the SFT'd tiny solvers of ``councilzoo.repro.tiny_lms`` (two-digit addition), sampled at
temperature ``LM_TEMPERATURE`` so the anchor's self-consistency carries signal. As in the
paper's setting (and the simulated demo council) the anchor is the most skilled model, the strong
solver (60-80% greedy accuracy), answering with ``LM_SAMPLES`` samples as the demo council does
(``FIRST_COUNCIL``); the peers are the two mid-skill solvers of each family (the Qwen one probes
and adjudicates VERIFY) and the weak solver, so collaboration can rescue the anchor's errors and
can also overturn its right answers.
COMED's thresholds and the router are fitted on the ``dev`` split, everything is scored on
``test``. The tiny solvers were SFT'd on first-turn prompts only (``tiny_lms.solver_messages``:
the question, no transcript), so ``solver_prompt`` renders every turn in that format: each
seat answers the question independently and the games' own rules do the collaborating (debate:
plurality of the debaters' final answers; VERIFY: the verifier's answer). Harm here is a wrong
collaborative answer replacing a right anchor answer, not a peer being talked out of it. Same
check as above, per seed-averaged row. Each council's seeds are independent cells, run in
parallel processes on one torch thread each.

Complementary part (``complementary``, pre-registered 2026-12-04 in docs/reproductions.md): the
first council's peers are weaker copies of the anchor's skill, so there is little for them to
rescue. ``COMPLEMENTARY_COUNCIL`` seats specialists whose errors fall on different items (a
no-carry specialist anchors, a carry specialist probes) and a verifier SFT'd to pick between the
anchor's and the probe's answers (``picking_prompt``), so escalation can rescue; its verdict is
``complementary_check``: COMED beats the anchor alone and dense debate at fewer calls, rescues more
than it harms, and the learned gates land between COMED and the oracle gate (registered
2026-12-04, every one deciding); since 2026-12-07 also COMED over its own anchor (the same anchor
samples: the primary number) and COMED over the router's anchor against routing alone (the
paper's routed anchor; ``run_lm_cell(routed=True)``, this council only, to keep ``repro all``
within its budget).

Sections: the result is assembled from sections (``SECTIONS``), each returning its results,
setup, figures and a sub-verdict; the claim's verdict holds when every part's does, and the
report lists each part's verdict and reason (``results["parts"]``).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from councilzoo.agents.base import Sampling  # noqa: E402
from councilzoo.agents.generators.transformers_backend import TransformersGenerator  # noqa: E402
from councilzoo.agents.llm import LLMAgent  # noqa: E402
from councilzoo.config import load_config  # noqa: E402
from councilzoo.envs.types import TurnContext  # noqa: E402
from councilzoo.evaluation.council import CouncilConfig  # noqa: E402
from councilzoo.evaluation.demo import DEMO_COUNCIL  # noqa: E402
from councilzoo.evaluation.harness import Evaluation  # noqa: E402
from councilzoo.evaluation.report import frontier_plot, pareto_frontier, rescue_harm_plot  # noqa: E402
from councilzoo.repro import map_in_processes, tiny_lms  # noqa: E402
from councilzoo.repro.report import run_sections, save_figure  # noqa: E402
from councilzoo.repro.verdicts import THRESHOLDS, flag_status, interval_status  # noqa: E402
from councilzoo.repro.verdicts import check as labelled  # noqa: E402
from councilzoo.tasks import synthetic_problems  # noqa: E402
from councilzoo.theory.stats import seed_interval  # noqa: E402

__all__ = [
    "CLAIM", "PROTOCOLS", "COLORS", "METRICS", "FULL", "QUICK", "LM_TEMPERATURE", "COMPLEMENTARY_COUNCIL",
    "run_cell", "simulated", "solver_role", "solver_prompt", "picking_prompt", "solver_agent",
    "run_lm_cell", "complementary_check", "SECTIONS", "run",
]

CLAIM = "Selective escalation (COMED) beats dense collaboration at lower cost, because it avoids harm."
PROTOCOLS = ("single", "self_consistency", "routing", "debate", "comed")
# The tiny-LM council adds the gates learned on COMED's dev outcomes and the oracle gate.
LM_PROTOCOLS = (*PROTOCOLS, "comed_learned", "comed_regret", "oracle_gate")
COLORS = {
    "single": "tab:blue",
    "self_consistency": "tab:orange",
    "routing": "tab:green",
    "debate": "tab:red",
    "comed": "tab:purple",
}
METRICS = ("accuracy", "calls", "tokens", "anchor_accuracy", "rescue", "harm", "net", "escalation_rate")
# 8 seeds since 2026-12-06: the simulated part at 100 items a level (it ran 3 x 200), the tiny-LM
# councils at their 250 items (they ran 3 seeds; their seeds run in parallel processes and their
# dev paths and gates replay the anchor's draws, so `repro all` keeps its 10 minutes).
FULL = {"levels": (0.0, 0.15, 0.3, 0.45, 0.6), "seeds": 8, "test": 100, "dev": 100,
        "lm_seeds": 8, "lm_test": 250, "lm_dev": 250}
QUICK = {"levels": (0.0, 0.3, 0.6), "seeds": 2, "test": 80, "dev": 100,
         "lm_seeds": 1, "lm_test": 24, "lm_dev": 24}
LM_TEMPERATURE = 0.8
LM_SAMPLES = 3  # anchor samples (self-consistency and COMED's consistency signal), as DEMO_COUNCIL's


@dataclass(frozen=True)
class Seating:
    """A tiny-LM council: seat -> ``tiny_lms.REGISTRY`` name; ``peers[0]`` is COMED's probe. A
    ``picking`` verifier was SFT'd to choose between the anchor's and the probe's answers
    (``tiny_lms.verifier_messages``) and answers greedily; otherwise the verifier re-solves."""

    anchor: str
    peers: tuple[str, ...]
    verifier: str
    picking: bool = False

    def names(self) -> list[str]:
        return list(dict.fromkeys([self.anchor, *self.peers, self.verifier]))


# Correlated skills: a strong anchor over weaker generalists (the first tiny-LM council).
FIRST_COUNCIL = Seating("solver-strong", ("solver-qwen-a", "solver-llama-b", "solver-weak"), "solver-qwen-a")
# Complementary skills (pre-registered 2026-12-04, docs/reproductions.md): a no-carry specialist
# anchors, a carry specialist probes, two generalists complete the debate, and a verifier picks
# (as amended before any of its models was built: Qwen lineage only, see the plan).
COMPLEMENTARY_COUNCIL = Seating("solver-nocarry", ("solver-carry", "solver-qwen-a", "solver-qwen-c"),
                                "verifier-strong", picking=True)


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
        mean, lo, hi = seed_interval([c[protocol][metric] for c in cells])
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
    save_figure(fig, path)


def _comed_check(comed: dict[str, Any], debate: dict[str, Any]) -> dict[str, Any]:
    """The claim's test on one pair of seed-averaged rows: COMED at least as accurate as dense
    debate, with fewer invocations and tokens, and less harm."""
    return {
        "comed_acc_minus_debate": comed["accuracy"] - debate["accuracy"],
        "calls_ratio": comed["calls"] / debate["calls"],
        "tokens_ratio": comed["tokens"] / debate["tokens"],
        "comed_harm": comed["harm"],
        "debate_harm": debate["harm"],
        "held": bool(
            comed["accuracy"] >= debate["accuracy"]
            and comed["calls"] < debate["calls"]
            and comed["tokens"] < debate["tokens"]
            and comed["harm"] < debate["harm"]
        ),
    }


def simulated(out_dir: Path, seeds: int | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """The simulated sweep: rows per (level, protocol), crossover, frontier, figures, sub-verdict."""
    seeds = seeds or sizes["seeds"]
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
    checks = [{"swayed_prob": lv, **_comed_check(table[lv]["comed"], table[lv]["debate"])} for lv in levels]
    cross = _crossover(levels, table)
    failed = [c["swayed_prob"] for c in checks if not c["held"]]
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
        reason = (
            f"at every harm level COMED matched or beat dense debate's accuracy with less harm, "
            f"using {checks[-1]['calls_ratio']:.2f}x its invocations and {checks[-1]['tokens_ratio']:.2f}x "
            f"its tokens at the most harm-prone level; {cross_text}."
        )
    return {
        "setup": {
            "council": "councilzoo.evaluation.demo.DEMO_COUNCIL (simulated)",
            "swept": "peers' swayed_prob",
            "levels": levels,
            "seeds": seeds,
            "test_problems": sizes["test"],
            "dev_problems": sizes["dev"],
        },
        "results": {"sweep": rows, "sweep_checks": checks, "dense_loses_to_anchor_from_swayed_prob": cross},
        "checks": {"comed_beats_debate_every_level": labelled(
            "paper", flag_status(not failed), "at every harm level, seed-averaged: COMED at least as "
            "accurate as dense debate, with fewer calls and tokens and less harm",
            f"failed at {failed or 'no level'}")},
        "reason": reason,
        "figures": ["sweep.png", "frontier.png"],
    }


# --- tiny-LM part -----------------------------------------------------------------------------


def solver_role(role: str) -> str:
    """The SFT role a game role is rendered as: itself if the solvers were trained on it, else member."""
    return role if role in tiny_lms.SOLVER_ROLES else "member"


def solver_prompt(ctx: TurnContext) -> list[dict[str, str]]:
    """Every seat's prompt in the tiny solvers' SFT format: the question alone, no transcript.

    ``LLMAgent``'s own renderer shows the probe, the verifier and every debater the other agents'
    answers, and uses the ``verifier`` role prompt; the tiny solvers saw neither in SFT.
    """
    return tiny_lms.solver_messages(ctx.problem, solver_role(ctx.role))


def picking_prompt(ctx: TurnContext) -> list[dict[str, str]]:
    """A picking verifier's prompt: the question with the anchor's and the probe's answers."""
    anchor, probe = ctx.extras.get("anchor_answer"), ctx.extras.get("probe_answer")
    return tiny_lms.verifier_messages(ctx.problem, anchor, probe)


def solver_agent(
    model: str, *, name: str, temperature: float = LM_TEMPERATURE, seed: int = 0, picking: bool = False
) -> LLMAgent:
    """An ``LLMAgent`` over the tiny LM at ``model``, prompted by ``solver_prompt`` (a solver) or
    ``picking_prompt`` (a picking verifier)."""
    generator = TransformersGenerator(model, batch_size=512, seed=seed)
    sampling = Sampling(max_new_tokens=tiny_lms.MAX_NEW_TOKENS, temperature=temperature)
    render = picking_prompt if picking else solver_prompt
    return LLMAgent(generator, sampling=sampling, render=render, name=name)


def lm_council(seating: Seating, seed: int, dev_size: int, routed: bool = False) -> CouncilConfig:
    """The tiny-LM council of ``seating``, sampled from ``seed`` (a picking verifier greedily);
    ``routed``: COMED's anchor is the router's choice per question (the paper's routed anchor)."""
    agent = f"{__name__}:{solver_agent.__name__}"
    models = {}
    for i, name in enumerate(seating.names()):
        kwargs = {"model": str(tiny_lms.tiny_lm(name)), "name": name, "seed": 1000 * seed + i}
        if seating.picking and name == seating.verifier:
            kwargs.update(picking=True, temperature=0.0)
        models[name] = {"type": agent, "kwargs": kwargs}
    return load_config(
        {
            "models": models,
            "anchor": seating.anchor,
            "peers": list(seating.peers),
            "verifier": seating.verifier,
            "samples": LM_SAMPLES,
            "debate_rounds": 2,
            "comed": {"lam": 0.02, "cost_unit": "calls", "dev_size": dev_size, "routed_anchor": routed},
        },
        CouncilConfig,
    )


def run_lm_cell(seating: Seating, seed: int, n_test: int, n_dev: int,
                routed: bool = False) -> dict[str, dict[str, Any]]:
    """One seed of a tiny-LM council: each protocol's summary row (plus the oracle gate); with
    ``routed``, also ``comed_routed``: COMED over the router's anchor, fitted and scored on the same
    dev and test items (COMED's paper claims it improves routed anchors as well as fixed ones)."""
    test = tiny_lms.addition_problems("test", n_test, seed=seed)
    dev = tiny_lms.addition_problems("dev", n_dev, seed=seed)
    ev = Evaluation(lm_council(seating, seed, n_dev), test, dev, progress=False, num_envs=n_test, seed=seed)
    rows = {row["protocol"]: row for row in ev.rows(LM_PROTOCOLS)}
    if routed:
        ev = Evaluation(lm_council(seating, seed, n_dev, routed=True), test, dev, progress=False,
                        num_envs=n_test, seed=seed)
        rows["comed_routed"] = {**ev.rows(("comed",))[0], "protocol": "comed_routed"}
    return rows


def council_rows(
    seating: Seating, seeds: int, sizes: dict[str, Any], out_dir: Path, prefix: str, routed: bool = False
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Run ``seating`` over ``seeds``: its protocol rows, the seed-averaged table, the results every
    council reports (rows, COMED's fits, frontiers) under ``prefix``, and its setup; saves the
    frontier and rescue-harm figures as ``<prefix>_frontier.png`` / ``<prefix>_rescue_harm.png``.
    ``routed`` adds COMED over the router's anchor (``run_lm_cell``)."""
    jobs = [(run_lm_cell, (seating, seed, sizes["lm_test"], sizes["lm_dev"], routed))
            for seed in range(seeds)]
    cells = map_in_processes(tiny_lms.on_one_thread, jobs, os.cpu_count() or 1)  # independent, seeded cells
    protocols = (*LM_PROTOCOLS, "comed_routed") if routed else LM_PROTOCOLS
    table = {p: _aggregate(cells, p) for p in protocols}
    rows = [{"protocol": p, "oracle": p == "oracle_gate", **table[p]} for p in protocols]
    frontier_plot(rows, out_dir / f"{prefix}_frontier.png")
    rescue_harm_plot([r for r in rows if r["protocol"] != "single"], out_dir / f"{prefix}_rescue_harm.png")
    fits = [
        {"seed": seed, **c["comed"]["thresholds"], **{f"path_{k}": v for k, v in c["comed"]["paths"].items()}}
        for seed, c in enumerate(cells)
    ]
    frontier = {cost: pareto_frontier(rows, cost) for cost in ("calls", "tokens")}
    keep = ("protocol", "oracle", *METRICS, "accuracy_ci")
    results = {
        f"{prefix}_protocols": [{k: r[k] for k in keep} for r in rows],
        f"{prefix}_comed_fits": fits,
        f"{prefix}_frontier_calls": frontier["calls"],
        f"{prefix}_frontier_tokens": frontier["tokens"],
    }
    models = {}
    for name in seating.names():
        info = tiny_lms.tiny_lm_info(tiny_lms.tiny_lm(name))
        models[name] = {"test": round(info["test_accuracy"], 3),
                        **{k: round(v, 3) for k, v in info["test_accuracy_by_skill"].items()}}
        if info["spec"]["task"] == "verifier":
            models[name]["solving"] = round(info["solving_accuracy"], 3)
    setup = {
        f"{prefix}_council": f"anchor {seating.anchor}, peers {list(seating.peers)} (1st probes), "
                             f"verifier {seating.verifier}" + (" (picks, greedy)" if seating.picking else ""),
        f"{prefix}_models_greedy_test_accuracy": models,
    }
    return cells, table, results, setup


def _summary(table: dict[str, dict[str, Any]], frontier: list[str]) -> str:
    comed, debate = table["comed"], table["debate"]
    return (
        f"COMED {comed['accuracy']:.3f} (rescue {comed['rescue']:.3f}, harm {comed['harm']:.3f}, "
        f"{comed['calls']:.2f} calls) vs dense debate {debate['accuracy']:.3f} "
        f"(rescue {debate['rescue']:.3f}, harm {debate['harm']:.3f}, {debate['calls']:.2f} calls), "
        f"anchor alone {table['single']['accuracy']:.3f}; accuracy-calls frontier: {', '.join(frontier)}"
    )


def _lm_setup(seeds: int, sizes: dict[str, Any]) -> dict[str, Any]:
    return {
        "lm_task": "two-digit addition (councilzoo.repro.tiny_lms); fitted on dev, scored on test",
        "lm_sampling": f"temperature {LM_TEMPERATURE}, anchor samples {LM_SAMPLES}, debate 3 x 2 rounds",
        "lm_prompts": "tiny_lms.solver_messages on every solver turn (solver_prompt): independent answers",
        "lm_seeds": seeds,
        "lm_test_problems": sizes["lm_test"],
        "lm_dev_problems": sizes["lm_dev"],
    }


def tiny_lms_part(out_dir: Path, seeds: int | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """The first tiny-LM council (correlated skills): rows with rescue/harm, frontier, sub-verdict."""
    lm_seeds = seeds or sizes["lm_seeds"]
    cells, table, results, setup = council_rows(FIRST_COUNCIL, lm_seeds, sizes, out_dir, "tiny_lm")
    gap = seed_interval([c["comed"]["accuracy"] - c["debate"]["accuracy"] for c in cells])
    check = {**_comed_check(table["comed"], table["debate"]), "acc_gap_ci_seeds": [gap[1], gap[2]]}
    comed, debate = table["comed"], table["debate"]
    wanted = {"accuracy": "higher", "calls": "lower", "tokens": "lower", "harm": "lower"}
    misses = [
        f"{m} {comed[m]:.3f} vs debate's {debate[m]:.3f} (wanted {want})"
        for m, want in wanted.items()
        if (comed[m] < debate[m] if want == "higher" else comed[m] >= debate[m])
    ]
    summary = _summary(table, results["tiny_lm_frontier_calls"])
    reason = summary + ("." if not misses else f"; COMED missed the check on {'; '.join(misses)}.")
    return {
        "setup": {**_lm_setup(lm_seeds, sizes), **setup},
        "results": {**results, "tiny_lm_check": [check]},
        "checks": {
            "comed_at_least_debate": labelled("paper", interval_status(gap[1], gap[2]), "95% CI of (COMED - "
                                              "dense debate) accuracy above 0, seed-paired", list(gap)),
            "comed_cheaper_and_less_harm": labelled(
                "paper", flag_status(not [m for m in misses if not m.startswith("accuracy")]),
                "seed-averaged calls, tokens and harm below dense debate's", f"{len(misses)} misses"),
        },
        "reason": reason,
        "figures": ["tiny_lm_frontier.png", "tiny_lm_rescue_harm.png"],
    }


def complementary_check(cells: list[dict[str, dict[str, Any]]], table: dict[str, dict[str, Any]]) -> dict:
    """The pre-registered checks of the complementary council (docs/reproductions.md, 2026-12-04):
    COMED more accurate than the anchor alone (every seed: the seed-paired interval above 0) and at
    least as accurate as dense debate, with fewer calls than debate; COMED's rescues above its
    harms; each learned gate's accuracy between COMED's and the oracle gate's."""
    comed, debate, oracle = table["comed"], table["debate"], table["oracle_gate"]
    over_anchor = seed_interval([c["comed"]["accuracy"] - c["single"]["accuracy"] for c in cells])
    # COMED's own anchor: the plurality of the same anchor samples COMED reads (replayed draws)
    over_own = seed_interval([c["comed"]["accuracy"] - c["self_consistency"]["accuracy"] for c in cells])
    routed = (seed_interval([c["comed_routed"]["accuracy"] - c["routing"]["accuracy"] for c in cells])
              if "comed_routed" in cells[0] else [None, None, None])
    checks = {
        "beats_anchor": over_anchor[1] > 0,
        "at_least_debate": comed["accuracy"] >= debate["accuracy"],
        "fewer_calls_than_debate": comed["calls"] < debate["calls"],
        "rescue_above_harm": comed["rescue"] > comed["harm"],
        **{f"{g}_between_comed_and_oracle": comed["accuracy"] <= table[g]["accuracy"] <= oracle["accuracy"]
           for g in ("comed_learned", "comed_regret")},
    }
    return {
        "comed_minus_own_anchor": over_own[0], "comed_minus_own_anchor_ci": [over_own[1], over_own[2]],
        "comed_routed_minus_routing": routed[0], "comed_routed_minus_routing_ci": [routed[1], routed[2]],
        "comed_minus_anchor": over_anchor[0], "comed_minus_anchor_ci": [over_anchor[1], over_anchor[2]],
        "comed_minus_debate": comed["accuracy"] - debate["accuracy"],
        "calls_ratio": comed["calls"] / debate["calls"],
        "comed_rescue": comed["rescue"], "comed_harm": comed["harm"],
        "learned": table["comed_learned"]["accuracy"], "regret": table["comed_regret"]["accuracy"],
        "oracle": oracle["accuracy"],
        **checks,
    }


def complementary_labelled(check: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The complementary council's checks, all ``paper``: COMED over its own anchor (the primary
    number: the same anchor samples with and without COMED) and over the router's anchor against
    routing alone (both added 2026-12-07), then the five registered on 2026-12-04: (1)-(4) and (5)
    the learned gates between COMED and the oracle gate, which was registered as deciding and so
    decides (it was relabelled an extension on 2026-12-06, after a result; docs/reproductions.md)."""
    lo, hi = check["comed_minus_anchor_ci"]
    own, routed = check["comed_minus_own_anchor_ci"], check["comed_routed_minus_routing_ci"]
    effect = THRESHOLDS["comed_over_anchor"].value
    return {
        "beats_own_anchor": labelled(
            "paper", interval_status(*own, effect), "95% t CI over seeds of (COMED - its own anchor: the "
            "plurality of the same anchor samples, self-consistency) above 0 (added 2026-12-07)",
            [check["comed_minus_own_anchor"], *own]),
        "routed_beats_routing": labelled(
            "paper", interval_status(*routed, effect), "95% t CI over seeds of (COMED over the router's "
            "anchor - routing alone) above 0: the paper's routed anchor (added 2026-12-07)",
            [check["comed_routed_minus_routing"], *routed]),
        "beats_anchor": labelled("paper", interval_status(lo, hi), "95% CI of (COMED - anchor alone) "
                                 "accuracy above 0, seed-paired", [check["comed_minus_anchor"], lo, hi]),
        "at_least_debate": labelled("paper", flag_status(check["at_least_debate"]),
                                    "COMED's seed-averaged accuracy >= dense debate's",
                                    check["comed_minus_debate"]),
        "fewer_calls_than_debate": labelled("paper", flag_status(check["fewer_calls_than_debate"]),
                                            "calls per question below dense debate's (ratio)",
                                            check["calls_ratio"]),
        "rescue_above_harm": labelled("paper", flag_status(check["rescue_above_harm"]),
                                      "COMED's rescue rate above its harm rate (rescue - harm)",
                                      check["comed_rescue"] - check["comed_harm"]),
        **{f"{g}_between_comed_and_oracle": labelled(
            "paper", flag_status(check[f"{g}_between_comed_and_oracle"]),
            f"councilzoo's {g} gate between COMED's and the oracle gate's accuracy", check[key])
           for g, key in (("comed_learned", "learned"), ("comed_regret", "regret"))},
    }


def complementary_part(out_dir: Path, seeds: int | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """The complementary tiny-LM council: can selective escalation keep the rescues?"""
    lm_seeds = seeds or sizes["lm_seeds"]
    council = COMPLEMENTARY_COUNCIL
    cells, table, results, setup = council_rows(council, lm_seeds, sizes, out_dir, "complementary",
                                                routed=True)
    check = complementary_check(cells, table)
    failed = [k for k, v in check.items() if isinstance(v, bool) and not v]
    summary = _summary(table, results["complementary_frontier_calls"])
    gates = (f"learned gates {check['learned']:.3f} (logistic), {check['regret']:.3f} (regret), "
             f"oracle gate {check['oracle']:.3f}")
    reason = f"{summary}; {gates}" + (f"; failed: {', '.join(failed)}." if failed else ".")
    return {
        "setup": setup,
        "results": {**results, "complementary_check": [check]},
        "checks": complementary_labelled(check),
        "reason": reason,
        "figures": ["complementary_frontier.png", "complementary_rescue_harm.png"],
    }


SECTIONS = (("simulated", simulated), ("tiny_lm", tiny_lms_part), ("complementary", complementary_part))


def run(out_dir: str | Path, seeds: int | None = None, quick: bool = False) -> dict[str, Any]:
    """Run every section into ``out_dir``; the result dict of ``councilzoo.repro.report``.

    ``seeds`` overrides each part's default number of seeds.
    """
    setup = {"protocols": list(PROTOCOLS), "quick": quick}
    return run_sections(CLAIM, SECTIONS, out_dir, seeds, QUICK if quick else FULL, setup)
