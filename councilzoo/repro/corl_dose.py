"""Experiment B, Co-RL's dose-response: one learner taught by frozen partners of rising skill.

``councilzoo repro corl-dose [--quick] [--seeds N] --out OUT`` (into ``OUT/corl_dose/``), or
``python -m councilzoo.repro.corl_dose --out DIR [--quick] [--seeds N] [--first-seed S]
[--jobs J] [--summarise]``, writes ``DIR/report.md``, ``report.json``, ``corl_dose.png`` and the
cells (``dose_cells.json``); plan, pilot and power calculation in docs/lab.md ("Experiment B"),
result in docs/reproductions.md.

Co-RL's ``ring`` rule rewards a member against its teacher's plurality answer.
Here the teacher is frozen, so its labels are a fixed function of the item: each seed samples the
partner ``label_samples`` times per unlabeled ``rl`` item (its own view, ``TEMPERATURE``) and the
learner trains on the items the partner labels, rewarded 1 for matching the partner's plurality
(``ground_truth`` against the partner's label; an item the partner leaves unlabeled would give
every sample 0, zero advantage, so it is left out). The learner is ``LEARNER`` on view 0 in every
arm; the arms differ only in the partner:

- four diverse partners of rising skill (``DIVERSE``: other families or lineages, view 1);
- ``copy``: a frozen copy of the learner itself on the learner's own view (an identical partner).

Every arm starts from the same checkpoint (the shipped learner), trains on the same ``rl`` items
in the same seeded order, and is scored on the same held-out ``test`` items: the comparisons are
paired by seed. Skill is the partner's label precision (the share of labeled items whose label is
gold), measured on the labels the learner trains on; gold is read only to report.

Checks (``paper``): (B1) gains rise with partner skill: per seed, the least-squares slope of the
learner's gain (final - start accuracy) against the diverse partners' label precision, its 95% CI
over seeds above 0; (B2) a diverse partner beats an identical copy at equal skill: per seed, the
diverse partners' gain interpolated (linearly, in label precision) at the copy's label precision
minus the copy's gain, its CI above 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from councilzoo.envs.rewards import own_label  # noqa: E402
from councilzoo.learners.corl.config import EvalConfig  # noqa: E402
from councilzoo.learners.data import DataConfig  # noqa: E402
from councilzoo.repro import check_seed_args, map_in_processes  # noqa: E402
from councilzoo.repro.cohort_runs import sample_answers, seed_ci, train_cohort  # noqa: E402
from councilzoo.repro.report import combine_parts, save_figure, utc_now, write_report  # noqa: E402
from councilzoo.repro.tiny_lms import addition_problems, tiny_lm  # noqa: E402
from councilzoo.repro.verdicts import check, describe, interval_status  # noqa: E402
from councilzoo.tasks import Problem, answers_equivalent  # noqa: E402
from councilzoo.theory.stats import paired_power, seeds_for_power, standardised_effect  # noqa: E402

__all__ = [
    "CLAIM", "LEARNER", "DIVERSE", "PARTNERS", "TEMPERATURE", "LEARNING_RATE", "FULL", "QUICK", "run_arm",
    "summarise", "power", "plan", "finish", "run", "main",
]

CLAIM = ("Co-RL's peer reward teaches a learner more the more often its partner's labels are right, "
         "and a diverse partner teaches more than an identical copy of equal skill.")
FIGURES_DIR = Path(__file__).resolve().parents[2] / "docs" / "figures"  # a full run copies its plot here

LEARNER = "solver-qwen-a"  # 54% greedy test accuracy, view 0
DIVERSE = {"weak": ("solver-weak", 1), "llama_b": ("solver-llama-b", 1), "strong": ("solver-strong", 1),
           "qwen_c": ("solver-qwen-c", 1)}  # 18%, 46%, 63%, 72% greedy test accuracy
PARTNERS = {**DIVERSE, "copy": (LEARNER, 0)}
TEMPERATURE = 0.7
LEARNING_RATE = 2e-4  # the Co-RL text part's (chosen there on supervised GRPO only)
# 19 seeds: the pilot's power calculation (docs/lab.md, Experiment B); every other size as planned
FULL = {"seeds": 19, "steps": 12, "prompts": 8, "generations": 8, "eval_every": 6, "eval_items": 200,
        "label_samples": 8}
QUICK = {"seeds": 2, "steps": 2, "prompts": 4, "generations": 4, "eval_every": 2, "eval_items": 24,
         "label_samples": 4}


def partner_items(partner: str, seed: int, settings: dict) -> tuple[list[Problem], float, float]:
    """The ``rl`` items the frozen partner labels, each with the partner's plurality answer as its
    answer; and the label precision and coverage (gold read only for these two numbers)."""
    name, view = PARTNERS[partner]
    problems = addition_problems("rl")
    answers = sample_answers(tiny_lm(name), problems, view, settings["label_samples"], TEMPERATURE, seed)
    labels = [own_label(group, p.kind) for group, p in zip(answers, problems, strict=True)]
    labeled = [(p, label) for p, label in zip(problems, labels, strict=True) if label is not None]
    right = [answers_equivalent(label, p.answer, p.kind) for p, label in labeled]
    items = [dataclasses.replace(p, answer=label) for p, label in labeled]
    return items, float(np.mean(right)) if right else float("nan"), len(labeled) / len(problems)


def run_arm(job: tuple[str, int, dict, Path]) -> dict[str, Any]:
    """Train the learner against one partner's labels for one seed; its curves and the labels'
    precision and coverage (a process-pool task)."""
    partner, seed, settings, out = job
    os.environ["OMP_NUM_THREADS"] = "1"
    run_dir = out / f"{partner}-seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    items, precision, coverage = partner_items(partner, seed, settings)
    path = run_dir / "items.jsonl"
    path.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in items))
    held_out = EvalConfig(dataset="jsonl", path=str(out / "test_items.jsonl"),
                          eval_steps=settings["eval_every"])
    curves = train_cohort("grpo", "ground_truth", [(LEARNER, str(tiny_lm(LEARNER)), 0)], seed, settings,
                          DataConfig(dataset="jsonl", path=str(path)), held_out, run_dir / "run",
                          {"learning_rate": LEARNING_RATE, "temperature": TEMPERATURE})
    return {"partner": partner, "seed": seed, "label_precision": precision, "label_coverage": coverage,
            "start": curves["accuracy"][0], "final": curves["accuracy"][-1]}


def cells_from_runs(out: Path, settings: dict) -> list[dict[str, Any]]:
    """The cells of every seed whose partners' runs all finished, read back from their folders (the
    partner's labels in ``items.jsonl``, graded against the ``rl`` items' gold answers; the learner's
    held-out accuracy at step 0 and at the last step in its ``eval.jsonl``): what ``run_arm``
    returned for them, so an interrupted run can be summarised (``--summarise``)."""
    gold = {p.id: p for p in addition_problems("rl")}
    n_rl = len(gold)
    found: dict[int, dict[str, dict]] = {}
    for partner in PARTNERS:
        for run_dir in out.glob(f"{partner}-seed*"):
            evals = [json.loads(line) for path in run_dir.glob("run/members/*/eval.jsonl")
                     for line in path.read_text().splitlines() if line.strip()]
            accuracy = {row["step"]: row["accuracy"] for row in evals}
            if 0 not in accuracy or settings["steps"] not in accuracy:
                continue  # not finished
            items = [json.loads(line) for line in (run_dir / "items.jsonl").read_text().splitlines()]
            right = [answers_equivalent(i["answer"], gold[i["id"]].answer, i["kind"]) for i in items]
            seed = int(run_dir.name.rsplit("-seed", 1)[1])
            found.setdefault(seed, {})[partner] = {
                "partner": partner, "seed": seed,
                "label_precision": float(np.mean(right)) if right else float("nan"),
                "label_coverage": len(items) / n_rl, "start": accuracy[0],
                "final": accuracy[settings["steps"]]}
    return [cell for seed in sorted(found) if len(found[seed]) == len(PARTNERS)
            for cell in (found[seed][p] for p in PARTNERS)]


def _per_seed(cells: list[dict[str, Any]]) -> tuple[list[int], list[float], list[float]]:
    """The seeds, and per seed the B1 slope and the B2 difference (module docstring)."""
    seeds = sorted({c["seed"] for c in cells})
    by = {(c["partner"], c["seed"]): c for c in cells}
    slopes, edges = [], []
    for s in seeds:
        x = np.array([by[p, s]["label_precision"] for p in DIVERSE])
        y = np.array([by[p, s]["final"] - by[p, s]["start"] for p in DIVERSE])
        slopes.append(float(np.polyfit(x, y, 1)[0]))
        order = np.argsort(x)
        copy = by["copy", s]
        at_copy = np.interp(copy["label_precision"], x[order], y[order])
        edges.append(float(at_copy - (copy["final"] - copy["start"])))
    return seeds, slopes, edges


def summarise(cells: list[dict[str, Any]]) -> tuple[list[dict], dict[str, dict]]:
    """Per-partner rows and the checks B1 and B2 (module docstring), from the cells."""
    seeds, slopes, edges = _per_seed(cells)
    by = {(c["partner"], c["seed"]): c for c in cells}
    rows = []
    for partner in PARTNERS:
        gains = [by[partner, s]["final"] - by[partner, s]["start"] for s in seeds]
        g = seed_ci(gains)
        rows.append({"partner": partner, "model": PARTNERS[partner][0], "view": PARTNERS[partner][1],
                     "label_precision": float(np.mean([by[partner, s]["label_precision"] for s in seeds])),
                     "label_coverage": float(np.mean([by[partner, s]["label_coverage"] for s in seeds])),
                     "gain": g[0], "gain_ci": (g[1], g[2])})
    slope, edge = seed_ci(slopes), seed_ci(edges)
    checks = {
        "gain_rises_with_partner_skill": check(
            "paper", interval_status(slope[1], slope[2]), "95% CI over seeds of the slope of the gain "
            "against the diverse partners' label precision above 0", slope),
        "diverse_beats_copy_at_equal_skill": check(
            "paper", interval_status(edge[1], edge[2]), "95% CI over seeds of (diverse partners' gain "
            "interpolated at the copy's label precision - the copy's gain) above 0", edge),
    }
    return rows, checks


def power(cells: list[dict[str, Any]], n_seeds: int) -> list[dict[str, Any]]:
    """Per check, from a pilot's cells: the per-seed statistics, the standardised effect d (mean /
    sd), the power of the paired t-test at ``n_seeds`` and the seeds that give 80%
    (``theory.stats``; the t-test stands in for the bootstrap interval)."""
    _, slopes, edges = _per_seed(cells)
    rows = []
    for name, values in (("gain_rises_with_partner_skill", slopes),
                         ("diverse_beats_copy_at_equal_skill", edges)):
        d = standardised_effect(values)
        rows.append({"check": name, "per_seed": [round(v, 4) for v in values],
                     "mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)), "d": d,
                     f"power_at_{n_seeds}": paired_power(d, n_seeds), "seeds_for_80": seeds_for_power(d)})
    return rows


def _plot(cells: list[dict[str, Any]], rows: list[dict], path: Path) -> None:
    """The learner's gain against its partner's label precision: each seed's arms as small points
    (diverse partners joined per seed), each partner's mean with its 95% CI, the copy marked."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for s in sorted({c["seed"] for c in cells}):
        diverse = sorted((c["label_precision"], c["final"] - c["start"]) for c in cells
                         if c["seed"] == s and c["partner"] in DIVERSE)
        ax.plot(*zip(*diverse, strict=True), color="tab:blue", alpha=0.25, linewidth=0.8, marker=".")
        copy = [(c["label_precision"], c["final"] - c["start"]) for c in cells
                if c["seed"] == s and c["partner"] == "copy"]
        ax.scatter(*zip(*copy, strict=True), color="tab:red", alpha=0.35, marker="x", s=20)
    for row in rows:
        copy = row["partner"] == "copy"
        lo, hi = row["gain_ci"]
        ax.errorbar([row["label_precision"]], [row["gain"]], yerr=[[row["gain"] - lo], [hi - row["gain"]]],
                    fmt="X" if copy else "o", ms=9, capsize=5, color="tab:red" if copy else "tab:blue",
                    label="copy of the learner (view 0)" if copy else None)
        ax.annotate(row["model"], (row["label_precision"], row["gain"]), textcoords="offset points",
                    xytext=(6, 6), fontsize=7)
    ax.plot([], [], color="tab:blue", marker="o",
            label="diverse partners (view 1): mean, 95% CI; lines per seed")
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_xlabel("partner's label precision (share of its labels that are gold)")
    ax.set_ylabel(f"{LEARNER}: final - start held-out accuracy")
    ax.set_title("Co-RL dose-response: one learner, frozen partners (ring rule)", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    save_figure(fig, path)


def plan(out: Path, n_seeds: int | None = None, quick: bool = False, first_seed: int = 0) -> list[tuple]:
    """Write the held-out items and list the partner x seed ``run_arm`` jobs (seeds ``first_seed`` on)."""
    settings = QUICK if quick else FULL
    n_seeds = n_seeds or settings["seeds"]
    out.mkdir(parents=True, exist_ok=True)
    test = addition_problems("test", settings["eval_items"])
    (out / "test_items.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in test))
    return [(partner, seed, settings, out) for seed in range(first_seed, first_seed + n_seeds)
            for partner in PARTNERS]


def finish(jobs: list[tuple], cells: list[dict[str, Any]], out: Path, quick: bool) -> dict[str, Any]:
    """``report.combine_parts``' part dict from the jobs and their cells (in job order); writes the
    cells to ``dose_cells.json`` and the plot; a full run copies the plot into the docs."""
    settings = jobs[0][2]
    seeds = sorted({seed for _, seed, *_ in jobs})
    rows, checks = summarise(cells)
    _, slopes, edges = _per_seed(cells)
    (out / "dose_cells.json").write_text(json.dumps(cells, indent=1))
    _plot(cells, rows, out / "corl_dose.png")
    if not quick and FIGURES_DIR.is_dir():
        shutil.copyfile(out / "corl_dose.png", FIGURES_DIR / "repro_corl_dose.png")
    return {
        "setup": {
            "dose_learner": f"{LEARNER} view 0, the same checkpoint in every arm",
            "dose_partners": ", ".join(f"{k} = {name} view {view}" for k, (name, view) in PARTNERS.items()),
            "dose_training": (f"ring rule against the frozen partner's plurality of "
                              f"{settings['label_samples']} samples (T {TEMPERATURE:g}); {settings['steps']} "
                              f"steps x {settings['prompts']} prompts x {settings['generations']} "
                              f"completions, lr {LEARNING_RATE:g}; held-out greedy accuracy on "
                              f"{settings['eval_items']} test items; seeds {seeds}"),
        },
        "results": {
            "dose_partners": rows,
            "dose_per_seed": [{"seed": s, "slope": a, "diverse_minus_copy": b}
                              for s, a, b in zip(seeds, slopes, edges, strict=True)],
            "dose_cells_file": "dose_cells.json",
        },
        "checks": checks,
        "reason": describe(checks),
        "figures": ["corl_dose.png"],
    }


def run(out_dir: str | Path, seeds: int | None = None, quick: bool = False, first_seed: int = 0,
        jobs: int | None = None) -> dict[str, Any]:
    """Every partner x seed run (``jobs`` processes, default one per core) and the report's result
    (``report.combine_parts``) of the part ``dose``."""
    out = Path(out_dir)
    calls = plan(out, seeds, quick, first_seed)
    cells = map_in_processes(run_arm, calls, jobs or os.cpu_count() or 1)
    return combine_parts(CLAIM, {"dose": finish(calls, cells, out, quick)}, {"quick": quick})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m councilzoo.repro.corl_dose",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--quick", action="store_true", help="small sizes: a pipeline check, not a verdict")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default: 19, --quick 2)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed (default 0; the pilot ran seeds 100 on)")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--summarise", action="store_true",
                        help="train nothing: report the seeds whose runs all finished in --out")
    args = parser.parse_args(argv)
    started_at = utc_now()
    check_seed_args(parser, args)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.summarise:
        out = Path(args.out)
        cells = cells_from_runs(out, QUICK if args.quick else FULL)
        if len({c["seed"] for c in cells}) < 2:
            parser.error(f"--summarise: {out} holds fewer than 2 seeds whose runs all finished")
        jobs = [(c["partner"], c["seed"], QUICK if args.quick else FULL, out) for c in cells]
        result = combine_parts(CLAIM, {"dose": finish(jobs, cells, out, args.quick)},
                               {"quick": args.quick, "summarised_from_runs": True})
    else:
        result = run(args.out, args.seeds, args.quick, args.first_seed, args.jobs)
    write_report(args.out, result, started_at=started_at)
    print(f"[corl dose-response] {result['verdict']['status']}: {result['verdict']['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
