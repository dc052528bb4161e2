"""Co-RL decided by co-training: one learner, partners that update too, against TTRL.

``councilzoo repro corl-cotrain [--quick] [--seeds N] --out OUT`` (into ``OUT/corl_cotrain/``), or
``python -m councilzoo.repro.corl_cotrain --out DIR [--quick] [--seeds N] [--first-seed S]`` (the
pilot: seeds 100 on), writes ``report.md``, ``report.json`` and the cells (``cotrain_cells.json``);
the plan, registered before any run, is in docs/lab.md ("Co-RL by co-training").

Every arm trains the learner ``LEARNER`` (view 0) from the shipped checkpoint on the same unlabeled
``rl`` items, seeded alike, and grades it on the same held-out ``test`` items (paired by seed):

- ``ttrl``: the learner alone, rewarded against its own majority (``self_majority``);
- ``corl_diverse``: a Co-RL ``ring`` with ``PARTNERS["corl_diverse"]``, a model of another family
  on view 1; both members update, each rewarded against the other's plurality;
- ``corl_diverse_2``: the same with a second partner of another family;
- ``corl_copy``: the same with a copy of the learner on view 1, so the partner differs in wording
  only (model diversity and wording diversity separated);
- ``grpo``: the learner alone on the gold answers (the supervised reference).

Checks, each on the learner's final held-out accuracy, paired over seeds (t interval): primary
(``paper``) the diverse Co-RL arms' mean minus TTRL, HELD above 0, NOT HELD when the interval lies
below the paper's own edge over TTRL (``THRESHOLDS["corl_over_ttrl"]``); secondary (``paper``,
Co-RL's diversity claim) diverse minus copy, HELD above 0, NOT HELD below 0.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.learners.corl.config import EvalConfig
from councilzoo.learners.data import DataConfig
from councilzoo.repro import check_seed_args, map_in_processes
from councilzoo.repro.cohort_runs import seed_ci, train_cohort
from councilzoo.repro.report import combine_parts, utc_now, write_report
from councilzoo.repro.tiny_lms import addition_problems, tiny_lm
from councilzoo.repro.verdicts import THRESHOLDS, check, describe, interval_status

__all__ = ["CLAIM", "LEARNER", "ARMS", "FULL", "QUICK", "run_arm", "summarise", "run", "main"]

CLAIM = ("Co-training with a partner of another family (both updating, each rewarded by the other's "
         "labels) raises a learner's held-out accuracy more than TTRL, and more than a copy of itself.")

LEARNER = "solver-qwen-a"  # qwen3, 54% greedy test accuracy
ARMS = {  # arm: (learner kind, reward rule, members as (model, view); the learner first)
    "ttrl": ("ttrl", "self_majority", ((LEARNER, 0),)),
    "corl_diverse": ("corl", "ring", ((LEARNER, 0), ("solver-llama-b", 1))),  # llama, 46%
    "corl_diverse_2": ("corl", "ring", ((LEARNER, 0), ("solver-strong", 1))),  # llama, 63%
    "corl_copy": ("corl", "ring", ((LEARNER, 0), (LEARNER, 1))),
    "grpo": ("grpo", "ground_truth", ((LEARNER, 0),)),
}
DIVERSE = ("corl_diverse", "corl_diverse_2")
TEMPERATURE = 0.7  # Experiment B's
LEARNING_RATE = 2e-4  # the Co-RL text part's
FULL = {"seeds": 16, "steps": 12, "prompts": 8, "generations": 8, "eval_every": 6, "eval_items": 200}
QUICK = {"seeds": 2, "steps": 2, "prompts": 4, "generations": 4, "eval_every": 2, "eval_items": 24}


def run_arm(job: tuple[str, int, dict, Path]) -> dict[str, Any]:
    """One arm and seed (a process-pool task): the learner's held-out accuracy at the start and end."""
    arm, seed, settings, out = job
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the member worlds
    kind, rule, members = ARMS[arm]
    held_out = EvalConfig(dataset="jsonl", path=str(out / "test_items.jsonl"),
                          eval_steps=settings["eval_every"])
    data = DataConfig(dataset="jsonl", path=str(out / "rl_items.jsonl"))
    curves = train_cohort(kind, rule, [(name, str(tiny_lm(name)), view) for name, view in members], seed,
                          settings, data, held_out, out / f"{arm}-seed{seed}",
                          {"learning_rate": LEARNING_RATE, "temperature": TEMPERATURE})
    learner = curves["first_member_accuracy"]  # members are read in order: the learner is first
    precision = [p for p in curves["label_precision"] if p == p]  # NaN: a step that labeled nothing
    return {"arm": arm, "seed": seed, "start": learner[0], "final": learner[-1],
            "label_precision": float(np.mean(precision)) if precision else None}


def summarise(cells: list[dict[str, Any]]) -> tuple[list[dict], dict[str, dict]]:
    """Per-arm rows and the primary and secondary checks (module docstring) from the cells."""
    seeds = sorted({c["seed"] for c in cells})
    final = {arm: np.array([next(c["final"] for c in cells if c["arm"] == arm and c["seed"] == s)
                            for s in seeds]) for arm in ARMS}
    start = np.array([next(c["start"] for c in cells if c["arm"] == "ttrl" and c["seed"] == s)
                      for s in seeds])
    rows = []
    for arm in ARMS:
        acc, gain = seed_ci(final[arm]), seed_ci(final[arm] - start)
        rows.append({"arm": arm, "members": " + ".join(f"{m} v{v}" for m, v in ARMS[arm][2]),
                     "learner_final": acc[0], "learner_final_ci": (acc[1], acc[2]),
                     "gain": gain[0], "gain_ci": (gain[1], gain[2])})
    diverse = np.mean([final[arm] for arm in DIVERSE], axis=0)
    edge = THRESHOLDS["corl_over_ttrl"].value
    primary, secondary = seed_ci(diverse - final["ttrl"]), seed_ci(diverse - final["corl_copy"])
    checks = {
        "diverse_corl_beats_ttrl": check(
            "paper", interval_status(primary[1], primary[2], refute=edge),
            f"95% t CI over seeds of the learner's final accuracy, diverse Co-RL (mean of "
            f"{', '.join(DIVERSE)}) - TTRL, above 0; NOT HELD below the paper's +{edge:.2f}", primary),
        "diverse_beats_copy": check(
            "paper", interval_status(secondary[1], secondary[2]),
            "95% t CI over seeds of the learner's final accuracy, diverse Co-RL - the copy on view 1, "
            "above 0", secondary),
    }
    return rows, checks


def run(out_dir: str | Path, seeds: int | None = None, quick: bool = False,
        first_seed: int = 0) -> dict[str, Any]:
    """Every arm x seed (seeds ``first_seed`` on; one process per core) and the report's result,
    part ``cotrain``."""
    settings = QUICK if quick else FULL
    n_seeds = seeds or settings["seeds"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rl = addition_problems("rl")
    (out / "rl_items.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in rl))
    test = addition_problems("test", settings["eval_items"])
    (out / "test_items.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in test))
    jobs = [(arm, seed, settings, out) for seed in range(first_seed, first_seed + n_seeds) for arm in ARMS]
    cells = map_in_processes(run_arm, jobs, os.cpu_count() or 1)
    (out / "cotrain_cells.json").write_text(json.dumps(cells, indent=1))
    rows, checks = summarise(cells)
    part = {
        "setup": {"cotrain_learner": f"{LEARNER} view 0, the same checkpoint in every arm",
                  "cotrain_training": (f"{settings['steps']} steps x {settings['prompts']} prompts x "
                                       f"{settings['generations']} completions at T {TEMPERATURE:g}, lr "
                                       f"{LEARNING_RATE:g}; learner's held-out greedy accuracy on "
                                       f"{settings['eval_items']} test items"),
                  "seeds": n_seeds, "first_seed": first_seed},
        "results": {"cotrain_arms": rows, "cotrain_cells_file": "cotrain_cells.json"},
        "checks": checks, "reason": describe(checks), "figures": [],
    }
    return combine_parts(CLAIM, {"cotrain": part}, {"quick": quick})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m councilzoo.repro.corl_cotrain",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--quick", action="store_true", help="small sizes: a pipeline check, not a verdict")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default: 16, --quick 2)")
    parser.add_argument("--first-seed", type=int, default=0, help="first seed (default 0; the pilot: 100)")
    args = parser.parse_args(argv)
    started_at = utc_now()
    check_seed_args(parser, args)
    result = run(args.out, args.seeds, args.quick, args.first_seed)
    write_report(args.out, result, started_at=started_at)
    print(f"[corl co-training] {result['verdict']['status']}: {result['verdict']['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
