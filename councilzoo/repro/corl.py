"""``councilzoo repro corl``: peer rewards without labels improve a cohort and resist collapse;
diversity helps (Co-RL, docs/learners.md), at toy scale on a CPU.

Language-model part, in two regimes (``REGIMES``; docs/reproductions.md, "Plan (2026-12-03)"):

- ``in_regime`` (the claim's verdict): three tiny LMs continued into the 60-80% band
  (``solver-qwen-a-hi``, ``solver-strong``, ``solver-qwen-c``: two families, two sizes) on views
  0/1/2, sampled at temperature 0.7, Co-RL rule ``peer_majority``;
- ``present`` (the first setting, the comparison row): ``solver-qwen-a`` (Qwen3) and
  ``solver-llama-b`` (a deeper Llama, another data order), 35-55% accurate, views 0/1,
  temperature 1, rule ``ring``.

Each regime trains, without labels on the unlabeled ``rl`` split, four arms at equal compute (as
many members as the regime's cohort, the same items, completions and policy updates per step):

- ``grpo``: supervised GRPO on gold labels (``Baseline``, ``ground_truth``): the ceiling reference;
- ``ttrl``: each member rewarded by its own majority answer (``Baseline``, ``self_majority``);
- ``corl_homogeneous``: copies of the regime's first model on view 0 (``CoRL``, the regime's rule);
- ``corl_heterogeneous``: the regime's cohort on its views (``CoRL``, the regime's rule).

Before training, ``measure_regime`` samples each member G times on every ``rl`` item at the
regime's temperature: its majority-of-G accuracy (``majority_accuracy``) and the peer labels the
rule would give (``peer_label_stats``). Measured per step: held-out greedy accuracy (``test``
split, original wording, every ``eval_every`` steps), pseudo-label accuracy (unlabeled counts
wrong) and precision (over labeled items), answer entropy, and *wrong consensus*, the collapse
indicator: the share of a group's samples that agree on a wrong plurality answer, averaged over
the step's items and the members.

Checked (each from the numbers, seed-paired, ``councilzoo.repro.verdicts``), per regime: heterogeneous
Co-RL ends above its starting models (the 95% CI of the gain above 0); above TTRL (the CI of the
paired difference above 0; the same members); the final wrong consensus of its first member below
the homogeneous cohort's, whose members are copies of that member's checkpoint (CI of the paired
difference above 0; since 2026-12-06: before, the whole heterogeneous cohort was compared with
copies of a stronger model). A CI that spans 0 is INCONCLUSIVE. ``in_regime``'s checks are the
paper's, after its precondition (every member's majority-of-G accuracy in ``MAJORITY_BAND``; a
failed precondition makes the part INCONCLUSIVE); ``present`` lies outside the paper's regime,
so its checks are reported as ``extension`` and do not decide.

The regime x arm x seed runs are independent and seeded, so they run in one process per CPU core
(one torch thread each) and give the same curves as one after another.

Simulated part (``councilzoo.repro.corl_sim``): tabular softmax cohorts under the same reward
rules, sweeping how much the members' errors coincide (where peer rewards tip into collapse) and
their initial skill (the gain against the starting peer-label precision, for both regimes'
cohorts). ``corl_regimes.png`` puts the LM regimes' gains on the simulated curves.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from councilzoo.learners.corl.config import EvalConfig  # noqa: E402
from councilzoo.learners.data import DataConfig
from councilzoo.repro import apply, corl_sim, corl_vlm_code, map_in_processes  # noqa: E402
from councilzoo.repro.cohort_runs import (  # noqa: E402
    MAJORITY_BAND,
    majority_accuracy,
    peer_label_stats,
    sample_answers,
    seed_ci,
    train_cohort,
)
from councilzoo.repro.report import combine_parts, save_figure  # noqa: E402
from councilzoo.repro.tiny_lms import (  # noqa: E402
    addition_problems,
    tiny_lm,
    tiny_lm_info,
)
from councilzoo.repro.verdicts import (  # noqa: E402
    THRESHOLDS,
    check,
    describe,
    flag_status,
    interval_status,
    part_status,
)
from councilzoo.tasks import Problem, answers_equivalent  # noqa: E402

__all__ = [
    "CLAIM", "Regime", "REGIMES", "PRIMARY", "ARMS", "FULL", "QUICK", "LEARNING_RATE", "TIP_GAIN",
    "summarise_lm", "summarise_sim", "regime_checks", "run",
]

CLAIM = (
    "Peer rewards without labels (Co-RL) improve a cohort of different models and resist the "
    "collapse of self-rewarding (TTRL); diversity of models and views helps."
)
FAMILY_A, FAMILY_B = "solver-qwen-a", "solver-llama-b"


@dataclass(frozen=True)
class Regime:
    """One cohort setting: the heterogeneous members (tiny LM, paraphrase view), the Co-RL peer
    rule and the sampling temperature (of training and of the pre-training majority measurement).
    Every arm of a regime has as many members as its heterogeneous cohort: the baselines train
    those members, the homogeneous cohort copies of the first one on view 0."""

    members: tuple[tuple[str, int], ...]
    rule: str
    temperature: float
    note: str

    def arms(self) -> dict[str, tuple[str, str, tuple[tuple[str, int], ...]]]:
        homogeneous = ((self.members[0][0], 0),) * len(self.members)
        return {
            "grpo": ("grpo", "ground_truth", self.members),
            "ttrl": ("ttrl", "self_majority", self.members),
            "corl_homogeneous": ("corl", self.rule, homogeneous),
            "corl_heterogeneous": ("corl", self.rule, self.members),
        }

    def models(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.members))


# "present": the first setting (two ~50%-accurate members at temperature 1, whose sampled majority
# was right 37-47% of the time); "in_regime": the paper's regime, members whose sampled majority is
# usually right (pre-registered in docs/reproductions.md, "Plan (2026-12-03)").
REGIMES: dict[str, Regime] = {
    "in_regime": Regime((("solver-qwen-a-hi", 0), ("solver-strong", 1), ("solver-qwen-c", 2)),
                        "peer_majority", 0.7,
                        "3 members, two families, two sizes, views 0/1/2, majority usually right"),
    "present": Regime(((FAMILY_A, 0), (FAMILY_B, 1)), "ring", 1.0,
                      "2 members at ~50% accuracy, temperature 1 (the first setting)"),
}
PRIMARY = "in_regime"  # the claim's verdict is this regime's; "present" is the comparison row
ARMS = tuple(REGIMES[PRIMARY].arms())
# 8 seeds since 2026-12-06 (issue 39: 3 seeds made a percentile interval the extreme seeds); the
# plan of 2026-12-03 ran 3, and so did the numpy simulation until later that day. The first setting
# ran 20 steps and evaluated 250 items every 5 steps.
FULL = {"seeds": 8, "steps": 12, "prompts": 8, "generations": 8, "eval_every": 6, "eval_items": 200,
        "measure_items": None, "sim": corl_sim.SimConfig(), "sim_seeds": 8}
QUICK = {"seeds": 2, "steps": 3, "prompts": 4, "generations": 4, "eval_every": 3, "eval_items": 24,
         "measure_items": 48,
         "sim": corl_sim.SimConfig(problems=16, steps=15, correlations=(0.0, 0.5, 1.0),
                                   skills=(0.3, 0.7)), "sim_seeds": 2}
log = logging.getLogger(__name__)
# Chosen on the reference arm only: supervised GRPO lost accuracy at 1e-3 and gained at 2e-4
# (6 steps, seed 0); every arm uses it.
LEARNING_RATE = 2e-4
BASE_GAIN = THRESHOLDS["corl_over_base"].value  # the paper's smallest average gain over the base
TTRL_EDGE = THRESHOLDS["corl_over_ttrl"].value  # the paper's edge over TTRL
TIP_GAIN = 0.02  # peer rules "tip" where they no longer add 2 points of accuracy over the start
FIGURES_DIR = Path(__file__).resolve().parents[2] / "docs" / "figures"  # full runs copy the headline here


# --- the majority precondition --------------------------------------------------------------


def measure_regime(
    regime: Regime, problems: Sequence[Problem], settings: dict, seed: int = 0
) -> dict[str, Any]:
    """Before any training: each heterogeneous member's majority-of-G accuracy on ``problems`` at the
    regime's temperature, and the peer labels the regime's rule would give from those samples."""
    golds = [p.answer for p in problems]
    answers, rows = [], []
    for name, view in regime.members:
        path = tiny_lm(name)
        group = sample_answers(path, problems, view, settings["generations"], regime.temperature, seed)
        answers.append(group)
        hits = [[a is not None and answers_equivalent(a, g, "numeric") for a in grp]
                for grp, g in zip(group, golds, strict=True)]
        rows.append({"model": name, "view": view, "test_accuracy": tiny_lm_info(path)["test_accuracy"],
                     "majority_accuracy": majority_accuracy(group, golds),
                     "sample_accuracy": float(np.mean(hits))})
    labels = peer_label_stats(answers, golds, regime.rule)
    lo, hi = MAJORITY_BAND
    return {"members": rows, "label_precision": labels["precision"], "label_coverage": labels["coverage"],
            "in_band": all(lo <= r["majority_accuracy"] <= hi for r in rows)}


# --- one arm, one seed ----------------------------------------------------------------------


def run_arm(
    regime: str, arm: str, seed: int, settings: dict, data: DataConfig, out: Path
) -> dict[str, list[float]]:
    """Per-step curves of one arm of ``regime`` (``train_cohort``), its members the regime's tiny
    LMs, held-out accuracy on the ``test`` items written beside ``data``."""
    kind, rule, members = REGIMES[regime].arms()[arm]
    models = {name: str(tiny_lm(name)) for name, _ in members}
    held_out = EvalConfig(dataset="jsonl", path=str(Path(data.path).with_name("test_items.jsonl")),
                          eval_steps=settings["eval_every"])
    return train_cohort(kind, rule, [(name, models[name], view) for name, view in members], seed, settings,
                        data, held_out, out / f"{regime}-{arm}-seed{seed}",
                        {"learning_rate": LEARNING_RATE, "temperature": REGIMES[regime].temperature})


def _run_job(job: tuple) -> dict[str, list[float]]:
    """``run_arm`` with one thread per member world (a process-pool task: one arm and seed)."""
    regime, arm, seed = job[:3]
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the member worlds
    curves = run_arm(*job)
    accuracy = [round(a, 3) for a in curves["accuracy"] if a == a]
    log.info("corl: %s %s seed %d: held-out accuracy %s", regime, arm, seed, accuracy)
    return curves


# --- aggregation and verdict ----------------------------------------------------------------


def _tail(curve: list[float]) -> float:
    """Mean of the last quarter of a per-step curve (the end state, less noisy than one step)."""
    return float(np.mean(curve[-max(1, len(curve) // 4):]))


def summarise_lm(runs: dict[str, list[dict[str, list[float]]]]) -> tuple[list[dict], dict[str, Any]]:
    """Per-arm table rows and the three checks, from per-seed curves (arms without seeds: not trained,
    the checks INCONCLUSIVE and marked not run)."""
    rows, per_seed = [], {}
    for arm, seeds in runs.items():
        if not seeds:
            continue
        start = [s["accuracy"][0] for s in seeds]
        final = [s["accuracy"][-1] for s in seeds]
        collapse = [_tail(s["wrong_consensus"]) for s in seeds]
        precision = [float(np.nanmean(s["label_precision"])) for s in seeds]
        first_collapse = [_tail(s["first_member_wrong_consensus"]) for s in seeds]
        per_seed[arm] = {"final": np.array(final), "gain": np.array(final) - np.array(start),
                         "collapse": np.array(collapse), "precision": np.array(precision),
                         "first_collapse": np.array(first_collapse)}
        gain, acc, col = seed_ci(per_seed[arm]["gain"]), seed_ci(final), seed_ci(collapse)
        rows.append({
            "arm": arm, "start_accuracy": float(np.mean(start)), "final_accuracy": acc[0],
            "final_accuracy_ci": (acc[1], acc[2]), "gain": gain[0], "gain_ci": (gain[1], gain[2]),
            "label_accuracy": float(np.mean([np.mean(s["label_accuracy"]) for s in seeds])),
            "label_precision": float(np.mean(precision)),
            "answer_entropy_end": float(np.mean([_tail(s["answer_entropy"]) for s in seeds])),
            "wrong_consensus_end": col[0], "wrong_consensus_ci": (col[1], col[2]),
            "first_member_start": float(np.mean([s["first_member_accuracy"][0] for s in seeds])),
            "first_member_gain": float(np.mean([s["first_member_accuracy"][-1] - s["first_member_accuracy"][0]
                                                for s in seeds])),
            "first_member_wrong_consensus_end": float(np.mean(per_seed[arm]["first_collapse"])),
        })
    if per_seed:
        het, ttrl, homo = per_seed["corl_heterogeneous"], per_seed["ttrl"], per_seed["corl_homogeneous"]
        gain = seed_ci(het["gain"])
        vs_ttrl = seed_ci(het["final"] - ttrl["final"])  # paired: same starting models and seed
        # one checkpoint on both sides: the homogeneous cohort's members are copies of the heterogeneous
        # cohort's first member (same model, view 0), so that member alone is compared with them
        less_collapse = seed_ci(homo["collapse"] - het["first_collapse"])
    else:
        gain = vs_ttrl = less_collapse = [None, None, None]
    not_run = "" if per_seed else " (not run: the precondition failed)"
    checks = {
        "heterogeneous_beats_start": check(
            "paper", interval_status(gain[1], gain[2], refute=BASE_GAIN),
            f"95% t CI over seeds of (final - start) accuracy above 0 (NOT HELD below the paper's "
            f"+{BASE_GAIN:.2f})" + not_run, gain),
        "heterogeneous_beats_ttrl": check(
            "paper", interval_status(vs_ttrl[1], vs_ttrl[2], refute=TTRL_EDGE),
            "95% t CI over seeds of (heterogeneous - TTRL) final accuracy above 0, seed-paired (NOT HELD "
            f"below the paper's +{TTRL_EDGE:.2f})" + not_run, vs_ttrl),
        "heterogeneous_collapses_less": check("paper", interval_status(less_collapse[1], less_collapse[2]),
                                              "95% CI of wrong consensus (homogeneous - the heterogeneous "
                                              "cohort's first member, the checkpoint the homogeneous "
                                              "members copy) above 0, seed-paired" + not_run, less_collapse),
    }
    return rows, checks


def summarise_sim(rows: list[dict], cfg: corl_sim.SimConfig) -> tuple[list[dict], dict[str, Any]]:
    """Per (rule, rho) means with CIs, and the correlation where each peer rule tips."""
    table = []
    for rule in corl_sim.RULES:
        for rho in cfg.correlations:
            sel = [r for r in rows if r["rule"] == rule and r["rho"] == rho]
            acc, col = seed_ci([r["accuracy"] for r in sel]), seed_ci([r["collapse"] for r in sel])
            gain = float(np.mean([r["accuracy"] - r["start_accuracy"] for r in sel]))
            start = float(np.mean([r["start_accuracy"] for r in sel]))
            table.append({"rule": rule, "rho": rho, "start_accuracy": start, "accuracy": acc[0],
                          "accuracy_ci": (acc[1], acc[2]), "gain": gain,
                          "wrong_consensus": col[0], "wrong_consensus_ci": (col[1], col[2])})
    tips = {}
    for rule in ("ring", "peer_majority"):
        tipped = [t["rho"] for t in table if t["rule"] == rule and t["gain"] < TIP_GAIN]
        tips[rule] = min(tipped) if tipped else None
    return table, tips


def summarise_labels(rows: list[dict], cfg: corl_sim.SimConfig) -> tuple[list[dict], dict[str, float | None]]:
    """Per (cohort, skill): mean starting label precision and gain; per cohort, the label
    precision where the simulated gain rises above ``TIP_GAIN`` (``corl_sim.label_threshold``)."""
    table = []
    for members, rule in corl_sim.LABEL_COHORTS:
        cohort = f"{rule}, {members} members"
        for skill in cfg.skills:
            sel = [r for r in rows if r["cohort"] == cohort and r["skill"] == skill]
            table.append({"cohort": cohort, "skill": skill,
                          "label_precision": float(np.mean([r["label_precision"] for r in sel])),
                          "gain": float(np.mean([r["gain"] for r in sel]))})
    thresholds = {}
    for members, rule in corl_sim.LABEL_COHORTS:
        cohort = f"{rule}, {members} members"
        points = [(t["label_precision"], t["gain"]) for t in table if t["cohort"] == cohort]
        thresholds[cohort] = corl_sim.label_threshold(points, TIP_GAIN)
    return table, thresholds


def regime_checks(per_regime: dict[str, dict], measured: dict[str, dict]) -> dict[str, dict[str, Any]]:
    """Each regime's checks (``summarise_lm``): the primary regime's are the paper's, after the
    precondition that every member's pre-training majority accuracy lies in ``MAJORITY_BAND``;
    the other regimes lie outside the paper's regime, so their checks are reported (``extension``)."""
    out = {}
    for name, (_, checks) in per_regime.items():
        if name != PRIMARY:
            out[name] = {k: {**c, "kind": "extension", "rule": c["rule"] + " (outside the paper's regime)"}
                         for k, c in checks.items()}
            continue
        accs = [m["majority_accuracy"] for m in measured[name]["members"]]
        band = f"[{MAJORITY_BAND[0]:.2f}, {MAJORITY_BAND[1]:.2f}]"
        out[name] = {"members_majority_in_band": check(
            "precondition", flag_status(measured[name]["in_band"]),
            f"every member's pre-training majority-of-G accuracy in {band} (mean, [min, max])",
            [float(np.mean(accs)), min(accs), max(accs)])} | checks
    return out


# --- figures --------------------------------------------------------------------------------


def _plot_regimes(runs: dict, measured: dict, label_table: list[dict], path: Path) -> None:
    """The headline: heterogeneous Co-RL's gain over its start against its peer-label precision
    during training, per regime (seeds as points, mean with 95% CI), with the simulated cohorts'
    gain against their starting label precision as lines."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    colors = {"in_regime": "tab:green", "present": "tab:red"}
    for members, rule in corl_sim.LABEL_COHORTS:
        cohort = f"{rule}, {members} members"
        sel = sorted((t["label_precision"], t["gain"]) for t in label_table if t["cohort"] == cohort)
        ax.plot(*zip(*sel, strict=True), linestyle=":", marker=".", color="gray" if members == 2 else "black",
                label=f"simulation: {cohort}")
    for name, arms in runs.items():
        seeds = arms["corl_heterogeneous"]
        x = np.array([np.nanmean(s["label_precision"]) for s in seeds])
        y = np.array([s["accuracy"][-1] - s["accuracy"][0] for s in seeds])
        mean, lo, hi = seed_ci(y)
        color = colors.get(name, "tab:blue")
        ax.scatter(x, y, color=color, alpha=0.45, s=22)
        r = REGIMES[name]
        ax.errorbar([x.mean()], [mean], yerr=[[mean - lo], [hi - mean]], fmt="o", ms=9, capsize=5,
                    color=color, label=f"tiny LMs, {name} ({r.rule}, {len(r.members)} members, "
                                       f"T={r.temperature:g})")
        pre = measured[name]["label_precision"]
        ax.axvline(pre, color=color, alpha=0.3, linewidth=1)
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_xlabel("peer-label accuracy (share of labeled items whose peer label is gold)")
    ax.set_ylabel("heterogeneous Co-RL: final - start accuracy")
    ax.set_title("Co-RL gain vs peer-label accuracy (thin lines: measured before training)", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    save_figure(fig, path)




def _plot_curves(runs: dict, key: str, ylabel: str, path: Path) -> None:
    """Per regime (one panel each), the arms' mean curve of ``key`` with a 2.5-97.5% seed band."""
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4), squeeze=False)
    for ax, (regime, arms) in zip(axes[0], runs.items(), strict=True):
        for arm, seeds in arms.items():
            curves = np.array([s[key] for s in seeds], dtype=float)
            steps = np.arange(curves.shape[1]) + (1 if key != "accuracy" else 0)
            keep = ~np.isnan(curves).any(axis=0)
            mean = curves[:, keep].mean(axis=0)
            ax.plot(steps[keep], mean, marker="o" if key == "accuracy" else None, label=arm)
            if len(seeds) > 1:
                lo, hi = np.percentile(curves[:, keep], [2.5, 97.5], axis=0)
                ax.fill_between(steps[keep], lo, hi, alpha=0.15)
        ax.set_title(regime)
        ax.set_xlabel("RL step")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    save_figure(fig, path)


def _plot_sim(table: list[dict], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for rule in corl_sim.RULES:
        sel = [t for t in table if t["rule"] == rule]
        rho = [t["rho"] for t in sel]
        axes[0].plot(rho, [t["accuracy"] for t in sel], marker="o", label=rule)
        axes[1].plot(rho, [t["wrong_consensus"] for t in sel], marker="o", label=rule)
    axes[0].plot(rho, [t["start_accuracy"] for t in sel], "k--", label="start")
    axes[0].set_ylabel("final greedy accuracy")
    axes[1].set_ylabel("final wrong consensus (collapse)")
    for ax in axes:
        ax.set_xlabel("error correlation rho")
        ax.legend(fontsize=8)
    save_figure(fig, path)


# --- entry point ----------------------------------------------------------------------------


def run(out_dir: str | Path, seeds: int | None, quick: bool) -> dict[str, Any]:
    """Run both parts into ``out_dir`` and return the report dict (``councilzoo.repro.report``)."""
    settings = QUICK if quick else FULL
    n_seeds = seeds or settings["seeds"]
    out = Path(out_dir)
    started = time.perf_counter()
    sim_seeds = settings["sim_seeds"] if seeds is None else seeds
    sim_rows = corl_sim.sweep(settings["sim"], sim_seeds)
    sim_table, tips = summarise_sim(sim_rows, settings["sim"])
    label_rows = corl_sim.label_sweep(settings["sim"], sim_seeds)
    label_table, thresholds = summarise_labels(label_rows, settings["sim"])
    sim_seconds = time.perf_counter() - started

    rl_items = addition_problems("rl")
    items = out / "rl_items.jsonl"
    items.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in rl_items))
    test_items = addition_problems("test", settings["eval_items"])
    (out / "test_items.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in test_items))
    data = DataConfig(dataset="jsonl", path=str(items))
    names = list(dict.fromkeys(n for r in REGIMES.values() for n in r.models()))
    # the precondition, measured before any training, on every unlabeled rl item (--quick: the first 48)
    measured = {name: measure_regime(r, rl_items[:settings["measure_items"]], settings)
                for name, r in REGIMES.items()}
    measure_seconds = time.perf_counter() - started - sim_seconds

    # as the vision-language and code parts (plan of 2026-12-05, extended to the text part
    # 2026-12-06): a full run trains no arm of the primary regime once its precondition failed,
    # since its verdict is INCONCLUSIVE whatever training shows; --quick trains every arm, as a
    # pipeline check
    trained = [name for name in REGIMES if quick or name != PRIMARY or measured[name]["in_band"]]
    jobs = [(regime, arm, seed, settings, data, out / "runs")
            for regime in trained for seed in range(n_seeds) for arm in ARMS]
    plans = [corl_vlm_code.plan_part(name, out, n_seeds, quick) for name in corl_vlm_code.COHORTS]
    # one pool for every part's independent, seeded runs (a pool's start imports torch in each
    # worker); the vision-language and code parts' longer runs go first, so no worker is left with
    # a long tail
    calls = [(corl_vlm_code.run_job, job) for plan in plans for job in plan.jobs]
    calls += [(_run_job, job) for job in jobs]
    pool_started = time.perf_counter()
    done = map_in_processes(apply, calls, os.cpu_count() or 1)
    training_seconds = time.perf_counter() - pool_started
    vlm_code_curves, curves = iter(done[:len(calls) - len(jobs)]), done[len(calls) - len(jobs):]
    runs: dict[str, dict[str, list[dict[str, list[float]]]]] = {r: {arm: [] for arm in ARMS} for r in trained}
    for (regime, arm, *_), curve in zip(jobs, curves, strict=True):
        runs[regime][arm].append(curve)  # seeds in order: jobs are listed seed-major
    per_regime = {name: summarise_lm(runs.get(name, {arm: [] for arm in ARMS})) for name in REGIMES}
    checks = regime_checks(per_regime, measured)
    (out / "curves.json").write_text(json.dumps(runs))  # per regime, arm, seed, step

    _plot_regimes(runs, measured, label_table, out / "corl_regimes.png")
    _plot_curves(runs, "accuracy", "held-out greedy accuracy", out / "corl_accuracy.png")
    _plot_curves(runs, "wrong_consensus", "wrong consensus (collapse)", out / "corl_collapse.png")
    _plot_sim(sim_table, out / "corl_sim.png")
    if not quick and FIGURES_DIR.is_dir():  # the docs page shows the full run's headline plot
        shutil.copyfile(out / "corl_regimes.png", FIGURES_DIR / "repro_corl_regimes.png")

    status = {name: part_status({k: {**c, "kind": "paper" if c["kind"] == "extension" else c["kind"]}
                                 for k, c in cs.items()}) for name, cs in checks.items()}
    reason = " ".join(f"[{name}: {status[name]}] {describe(cs)}" for name, cs in checks.items())
    regime_rows = []
    for name, r in REGIMES.items():
        het = next((row for row in per_regime[name][0] if row["arm"] == "corl_heterogeneous"),
                   {"label_precision": float("nan"), "gain": float("nan"), "gain_ci": (float("nan"),) * 2})
        regime_rows.append({
            "regime": name, "rule": r.rule, "temperature": r.temperature, "members": len(r.members),
            "majority_accuracy_min": min(m["majority_accuracy"] for m in measured[name]["members"]),
            "majority_accuracy_max": max(m["majority_accuracy"] for m in measured[name]["members"]),
            "pre_label_precision": measured[name]["label_precision"],
            "pre_label_coverage": measured[name]["label_coverage"],
            "train_label_precision": het["label_precision"],
            "heterogeneous_gain": het["gain"], "heterogeneous_gain_ci": het["gain_ci"],
            "status": status[name],
        })
    models = {name: tiny_lm_info(tiny_lm(name)) for name in names}
    text = {
        "setup": {
            "regimes": {name: f"{r.note}: rule {r.rule}, temperature {r.temperature:g}, arms "
                              + "; ".join(f"{arm} = {kind}/{rule} {list(members)}"
                                          for arm, (kind, rule, members) in r.arms().items())
                        for name, r in REGIMES.items()},
            "primary_regime": PRIMARY, "majority_band": MAJORITY_BAND,
            "seeds": n_seeds, "steps": settings["steps"], "prompts_per_step": settings["prompts"],
            "generations": settings["generations"], "learning_rate": LEARNING_RATE,
            "eval_items": settings["eval_items"], "eval_every": settings["eval_every"],
            "models": {n: {k: i[k] for k in ("parameters", "steps", "test_accuracy")}
                       for n, i in models.items()},
            "sim": {k: v for k, v in vars(settings["sim"]).items()},
        },
        "results": {
            "regimes": regime_rows,
            "majority_before_training": [{"regime": name, **m} for name, r in measured.items()
                                         for m in r["members"]],
            "arms": [{"regime": name, **row} for name, (rows, _) in per_regime.items() for row in rows],
            "curves_file": "curves.json",
            "simulation": sim_table,
            "simulation_tipping_rho": tips,
            "simulation_labels": label_table,
            "simulation_label_threshold": thresholds,
            "training_seconds": round(training_seconds, 1),  # every part's runs, in one pool
            "measure_seconds": round(measure_seconds, 1),
            "sim_seconds": round(sim_seconds, 1),
        },
        "checks": {f"{name}:{k}": c for name, cs in checks.items() for k, c in cs.items()},
        "reason": reason,
        "figures": ["corl_regimes.png", "corl_accuracy.png", "corl_collapse.png", "corl_sim.png"],
    }
    parts = {"text": text}
    for plan in plans:
        parts[plan.part] = corl_vlm_code.finish_part(plan, [next(vlm_code_curves) for _ in plan.jobs])
    return combine_parts(CLAIM, parts, {"quick": quick})
