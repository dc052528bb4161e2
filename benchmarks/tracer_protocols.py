"""TRACER's learned speak/skip policy against fixed protocols, with simulated agents (CPU).

Subject: TRACER's regret-matching controllers (RM+, counterfactual values), trained on a
synthetic train split and evaluated (average strategy, argmax) on a disjoint test split.
Baselines on the same env, agents and test problems: always speak, never review, alternate,
random, and the released configuration (plain RM, the release's myopic values, argmax).
Reports accuracy, objective = accuracy - lam * calls, calls per question, correction and
preservation rates. Writes benchmarks/results/tracer_protocols.json.

    python benchmarks/tracer_protocols.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from councilzoo.config import load_config
from councilzoo.learners.tracer.config import BASELINES, TracerConfig
from councilzoo.learners.tracer.learner import Tracer

# Reviewers catch most errors but also raise false alarms, and proposers can be swayed off a
# right answer: speaking helps in some states and harms in others.
POOL = {"proposer": {"skill": 0.5, "swayed_prob": 0.4},
        "reviewer": {"skill": 0.6, "catch_prob": 0.85, "false_alarm_prob": 0.25}}
COLUMNS = ("accuracy", "objective", "calls_per_question", "correction_rate", "preservation_rate",
           "harmful_flips_per_question")


def config(steps: int, problems: int, eval_size: int, controller: dict) -> TracerConfig:
    data = {"synthetic_size": max(eval_size, 4 * problems), "eval_limit": eval_size}
    return load_config({"max_steps": steps, "problems_per_step": problems, "env": {"lam": 0.03},
                        "agents": {"simulated": POOL}, "controller": controller, "data": data}, TracerConfig)


def trained(cfg: TracerConfig) -> tuple[Tracer, float]:
    start = time.perf_counter()
    tracer = Tracer(cfg)
    while tracer.step_count < cfg.max_steps:
        tracer.step()
    return tracer, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and test problems")
    args = parser.parse_args()
    steps, problems, eval_size = (8, 32, 128) if args.quick else (30, 64, 512)
    subject = {"variant": "rm+", "values": "counterfactual"}
    tracer, seconds = trained(config(steps, problems, eval_size, subject))
    released, _ = trained(config(steps, problems, eval_size, {"variant": "rm", "values": "myopic_released"}))
    test = tracer.eval_sets["synthetic:numeric"]
    results = tracer.compare(test, BASELINES)
    results["released_config"] = released.evaluate(test)
    rows = [{"protocol": name, **{c: m[c] for c in COLUMNS}} for name, m in results.items()]
    print(f"TRACER vs fixed protocols: {len(test)} test problems, lam=0.03, {steps} steps x {problems} "
          f"problems ({seconds:.1f} s training)")
    print(f"{'protocol':16s}" + "".join(f"{c[:14]:>16s}" for c in COLUMNS))
    for row in rows:
        print(f"{row['protocol']:16s}" + "".join(f"{'n/a' if row[c] is None else f'{row[c]:.3f}':>16s}"
                                                for c in COLUMNS))
    learned = results["tracer"]["objective"]
    best = max((name for name in results if name != "tracer"), key=lambda n: results[n]["objective"])
    summary = {
        "objective_gain_over_best_baseline": learned - results[best]["objective"],
        "best_baseline": best,
        "objective_gain_over_always_speak": learned - results["always_speak"]["objective"],
        "objective_gain_over_never_review": learned - results["never_review"]["objective"],
        "calls_ratio_vs_always_speak": results["tracer"]["calls_per_question"]
        / results["always_speak"]["calls_per_question"],
        "regret_within_bound": not tracer.controller.report() or all(
            r["regret"] <= r["bound"] for r in tracer.controller.report()),
        "training_seconds": seconds,
    }
    print(json.dumps(summary, indent=1))
    out = Path(__file__).parent / "results" / "tracer_protocols.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "table": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
