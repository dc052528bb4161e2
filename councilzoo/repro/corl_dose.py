"""Experiment B, Co-RL's dose-response: one learner taught by frozen partners of rising skill.

``python -m councilzoo.repro.corl_dose --out DIR [--quick] [--seeds N]`` (docs/reproductions.md,
"Experiment B"). Co-RL's ``ring`` rule rewards a member against its teacher's plurality answer.
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
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.envs.rewards import own_label
from councilzoo.learners.corl.config import EvalConfig
from councilzoo.learners.data import DataConfig
from councilzoo.repro import map_in_processes
from councilzoo.repro.cohort_runs import sample_answers, seed_ci, train_cohort
from councilzoo.repro.tiny_lms import addition_problems, tiny_lm
from councilzoo.repro.verdicts import check, describe, interval_status, part_status
from councilzoo.tasks import Problem, answers_equivalent

__all__ = [
    "LEARNER", "DIVERSE", "PARTNERS", "TEMPERATURE", "LEARNING_RATE", "FULL", "QUICK", "run_arm",
    "summarise", "run", "main",
]

LEARNER = "solver-qwen-a"  # 54% greedy test accuracy, view 0
DIVERSE = {"weak": ("solver-weak", 1), "llama_b": ("solver-llama-b", 1), "strong": ("solver-strong", 1),
           "qwen_c": ("solver-qwen-c", 1)}  # 18%, 46%, 63%, 72% greedy test accuracy
PARTNERS = {**DIVERSE, "copy": (LEARNER, 0)}
TEMPERATURE = 0.7
LEARNING_RATE = 2e-4  # the Co-RL text part's (chosen there on supervised GRPO only)
FULL = {"seeds": 8, "steps": 12, "prompts": 8, "generations": 8, "eval_every": 6, "eval_items": 200,
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


def summarise(cells: list[dict[str, Any]]) -> tuple[list[dict], dict[str, dict]]:
    """Per-partner rows and the checks B1 and B2 (module docstring), from the cells."""
    seeds = sorted({c["seed"] for c in cells})
    by = {(c["partner"], c["seed"]): c for c in cells}
    rows = []
    for partner in PARTNERS:
        gains = [by[partner, s]["final"] - by[partner, s]["start"] for s in seeds]
        g = seed_ci(gains)
        rows.append({"partner": partner, "model": PARTNERS[partner][0], "view": PARTNERS[partner][1],
                     "label_precision": float(np.mean([by[partner, s]["label_precision"] for s in seeds])),
                     "label_coverage": float(np.mean([by[partner, s]["label_coverage"] for s in seeds])),
                     "gain": g[0], "gain_ci": (g[1], g[2])})
    slopes, edges = [], []
    for s in seeds:
        x = np.array([by[p, s]["label_precision"] for p in DIVERSE])
        y = np.array([by[p, s]["final"] - by[p, s]["start"] for p in DIVERSE])
        slopes.append(float(np.polyfit(x, y, 1)[0]))
        order = np.argsort(x)
        copy = by["copy", s]
        at_copy = np.interp(copy["label_precision"], x[order], y[order])
        edges.append(float(at_copy - (copy["final"] - copy["start"])))
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


def run(out_dir: str | Path, seeds: int | None = None, quick: bool = False) -> dict[str, Any]:
    """Every partner x seed run (one process per core); the rows, the checks and the part's status."""
    settings = QUICK if quick else FULL
    n_seeds = seeds or settings["seeds"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    test = addition_problems("test", settings["eval_items"])
    (out / "test_items.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in test))
    jobs = [(partner, seed, settings, out) for seed in range(n_seeds) for partner in PARTNERS]
    cells = map_in_processes(run_arm, jobs, os.cpu_count() or 1)
    rows, checks = summarise(cells)
    result = {"settings": settings, "seeds": n_seeds, "cells": cells, "partners": rows,
              "checks": checks, "status": part_status(checks), "reason": describe(checks)}
    (out / "dose_response.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m councilzoo.repro.corl_dose",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--quick", action="store_true", help="small sizes: a pipeline check, not a verdict")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default: 8, --quick 2)")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 2:
        parser.error(f"--seeds must be >= 2 (the checks are intervals over seeds), got {args.seeds}")
    result = run(args.out, args.seeds, args.quick)
    print(f"[corl dose-response] {result['status']}: {result['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
