"""A 2-member Co-RL cohort step against one member training alone, on SmolLM2-135M-Instruct:

    python benchmarks/cohort_step.py [--steps 3] [--output benchmarks/results/cohort_step_smollm2.json]

Both runs go through the engine ``councilzoo train`` uses (``repro.cohort_runs.train_cohort``: one
process world per member): Co-RL (rule "ring", members on views 0 and 1) and TTRL with that one
member ("self_majority"), the same shape (2 prompts x 4 completions x 32 tokens, full weights,
fp32, ``synthetic:word_problems`` at difficulty 0.1). A step's time is the gap between successive
rows of member 0's metrics.jsonl (watched while it trains), the first step excluded as warm-up;
the ratio is the cohort's median step over the lone member's. With ``OMP_NUM_THREADS=1`` each
member world computes on one thread, so on 2 cores the two worlds run side by side and the ratio
is what the second member and the link between them cost (near 1), as on one GPU per member.
Prints a table and writes the result as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from councilzoo.agents.generators import resolve_model_path
from councilzoo.learners.corl.config import EvalConfig
from councilzoo.learners.data import DataConfig
from councilzoo.repro.cohort_runs import train_cohort

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "cohort_step_smollm2.json"
SETTINGS = {"prompts": 2, "generations": 4}
TOKENS = 32


def step_times(kind: str, rule: str, members: list, steps: int, out: Path) -> list[float]:
    """Seconds between successive logged steps of member 0 of a ``kind`` run."""
    metrics = out / "members" / "m0-smollm2" / "metrics.jsonl"
    seen: dict[int, float] = {}
    run = threading.Thread(target=train_cohort, args=(
        kind, rule, members, 0, {**SETTINGS, "steps": steps},
        DataConfig(dataset="synthetic:word_problems", num_problems=32, difficulty=0.1),
        EvalConfig(), out, {"learning_rate": 1e-6}, TOKENS))  # fmt: skip
    run.start()
    while run.is_alive():
        if metrics.exists():
            for line in metrics.read_text().splitlines():
                row = json.loads(line) if line.endswith("}") else {}
                if "reward" in row:
                    seen.setdefault(row["step"], time.perf_counter())
        time.sleep(0.2)
    run.join()
    stamps = [seen[s] for s in sorted(seen)]
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--output", default=str(RESULT))
    args = parser.parse_args()
    model = resolve_model_path("smollm2-135m-instruct")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cohort = step_times("corl", "ring", [("smollm2", model, 0), ("smollm2", model, 1)], args.steps,
                            Path(tmp) / "cohort")  # fmt: skip
        alone = step_times("ttrl", "self_majority", [("smollm2", model, 0)], args.steps, Path(tmp) / "alone")
    result = {
        "model": "smollm2-135m-instruct", "shape": [SETTINGS["prompts"], SETTINGS["generations"], TOKENS],
        "steps": args.steps, "cohort_step_s": cohort, "alone_step_s": alone,
        "ratio_cohort_over_alone": round(statistics.median(cohort) / statistics.median(alone), 3),
        "load_avg_before_after": [[round(x, 2) for x in load], [round(x, 2) for x in os.getloadavg()]],
        "cpus": os.cpu_count(),
    }  # fmt: skip
    print(f"| run | s/step (after the first) |\n|---|---|\n| 2-member Co-RL | {cohort} |\n"
          f"| one member (TTRL) | {alone} |\nratio {result['ratio_cohort_over_alone']}")
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
