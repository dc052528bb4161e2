"""SmolLM2-135M-Instruct's accuracy against synthetic:word_problems' difficulty (docs/tasks.md):

    python scripts/smollm2_difficulty.py [--problems 12] [--samples 8] [--temperature 0.5] [--levels 0 0.5]
        [--out docs/figures/smollm2_difficulty.json] [--figure docs/figures/smollm2_difficulty.png]

At each difficulty level, ``--problems`` test problems (seed 0) are answered through a cohort
member's prompt in the concise style (``member_prompt(..., style="concise")``, 40 new tokens):
greedily once, and ``--samples`` times with ``--temperature``, whose plurality answer gives the
majority-of-G accuracy (``repro.cohort_runs.majority_accuracy``). Replies at the token limit are
read as truncated. Each accuracy comes with its 95% percentile bootstrap interval over the
problems (``theory.stats.mean_ci``). Prints a markdown table; writes the figures as JSON and a plot.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators import TransformersGenerator
from councilzoo.agents.prompts import member_prompt
from councilzoo.repro.cohort_runs import MAJORITY_BAND, majority_accuracy
from councilzoo.tasks import answers_equivalent, extract_answer, load_problems
from councilzoo.theory.stats import mean_ci

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_NEW_TOKENS = 40


def answers(gen, prompts, n: int, temperature: float) -> list[list[str | None]]:
    sampling = Sampling(max_new_tokens=MAX_NEW_TOKENS, temperature=temperature, seed=0)
    return [
        [extract_answer(c.text, "numeric", truncated=c.finish_reason == "length") for c in group]
        for group in gen.generate(prompts, n=n, sampling=sampling)
    ]


def share_right(groups: list[list[str | None]], golds: list[str]) -> list[float]:
    """Per problem, the share of its answers that are right."""
    pairs = zip(groups, golds, strict=True)
    return [sum(answers_equivalent(a, g, "numeric") for a in group) / len(group) for group, g in pairs]


def with_ci(name: str, per_problem: list[float]) -> dict[str, float | list[float]]:
    """``name`` (the mean over problems) and ``name_ci`` (its 95% bootstrap interval)."""
    mean, lo, hi = mean_ci(per_problem, seed=0)
    return {name: mean, f"{name}_ci": [lo, hi]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--levels", type=float, nargs="+", default=LEVELS)
    parser.add_argument("--out", default="docs/figures/smollm2_difficulty.json")
    parser.add_argument("--figure", default="docs/figures/smollm2_difficulty.png")
    args = parser.parse_args()
    gen = TransformersGenerator("smollm2-135m-instruct", batch_size=64)
    rows, start = [], time.perf_counter()
    for level in args.levels:
        problems = load_problems("synthetic:word_problems", "test", limit=args.problems, difficulty=level)
        golds = [p.answer for p in problems]
        prompts = [member_prompt(p, 0, style="concise") for p in problems]
        greedy = [a[0] for a in answers(gen, prompts, 1, 0.0)]
        sampled = answers(gen, prompts, args.samples, args.temperature)
        majority = [majority_accuracy([group], [gold]) for group, gold in zip(sampled, golds, strict=True)]
        rows.append({
            "difficulty": level,
            **with_ci("greedy_accuracy", share_right([[a] for a in greedy], golds)),
            **with_ci("majority_accuracy", majority),
            **with_ci("sample_accuracy", share_right(sampled, golds)),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
        result = {"model": "smollm2-135m-instruct", "task": "synthetic:word_problems", "split": "test",
                  "problems_per_level": args.problems, "samples": args.samples,
                  "temperature": args.temperature, "max_new_tokens": MAX_NEW_TOKENS,
                  "majority_band": MAJORITY_BAND,
                  "seconds": round(time.perf_counter() - start), "levels": rows}  # fmt: skip
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")  # after each level
    print(f"| difficulty | greedy | majority-of-{args.samples} | one sample |\n|---|---|---|---|")
    for r in rows:
        cells = [f"{r[k]:.2f} [{r[k + '_ci'][0]:.2f}, {r[k + '_ci'][1]:.2f}]"
                 for k in ("greedy_accuracy", "majority_accuracy", "sample_accuracy")]  # fmt: skip
        print(f"| {r['difficulty']:.2f} | " + " | ".join(cells) + " |")
    plot(result, args.figure)


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [r["difficulty"] for r in result["levels"]]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.axhspan(*result["majority_band"], color="tab:green", alpha=0.12, label="Co-RL's majority band")
    ax.axhspan(0.3, 0.7, color="tab:blue", alpha=0.06, label="greedy 30-70%")
    curves = {"greedy_accuracy": "greedy", "majority_accuracy": f"majority of {result['samples']}",
              "sample_accuracy": f"one sample (T={result['temperature']})"}  # fmt: skip
    for key, label in curves.items():
        means = [r[key] for r in result["levels"]]
        cis = [r.get(f"{key}_ci", (r[key], r[key])) for r in result["levels"]]  # older files have none
        pairs = list(zip(means, cis, strict=True))
        errors = [[m - lo for m, (lo, _) in pairs], [hi - m for m, (_, hi) in pairs]]
        ax.errorbar(levels, means, yerr=errors, marker="o", capsize=3, label=label)
    ax.set(xlabel="difficulty (synthetic:word_problems)", ylabel="accuracy", ylim=(0, 1),
           title=f"SmolLM2-135M-Instruct, {result['problems_per_level']} test problems a level")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
