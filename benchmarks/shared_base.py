"""N cohort members as N LoRA adapters on one base in one world, against N separate models (a world each):

    python benchmarks/shared_base.py [--model smollm2|tiny] [--members 2 4] [--steps 4] [--output FILE]

Both runs go through ``launch_cohort`` (what ``councilzoo train corl`` runs): the same ring cohort of
N members, each a LoRA adapter (r 8 on q, k, v, o) of the same base, 2 prompts x 4 completions x 16
tokens a step, fp32 on CPU; once with every member in one ``shared_base`` group (one process, the
base loaded once, the adapters' trainers taking turns), once as N worlds. Peak memory is the largest
sum of the resident set sizes of the launcher's child processes, sampled every 50 ms; step time is
the median of TRL's ``step_time`` over members and steps after the first (it includes the wait for
the peers' labels, so it is the cohort's round). Generation: one ``AdapterGenerator`` decoding the
N adapters' prompts in one call against N generators of one adapter each, each on its own base
copy, the same prompts and seed; tokens a second. Ratios are shared over separate, in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from councilzoo.config import load_config
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.launch import launch_cohort
from councilzoo.learners.logging import read_metrics

ROOT = Path(__file__).resolve().parents[1]
LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
PROMPTS, GENERATIONS, TOKENS = 2, 4, 16


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PeakChildMemory:
    """The largest summed RSS (MiB) of this process's descendants while in the ``with`` block."""

    def __enter__(self) -> PeakChildMemory:
        self.peak, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.05):
            total = 0
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total / 2**20)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def train(model: str, members: int, shared: bool, steps: int, out: Path) -> dict:
    group = {"shared_base": "base"} if shared else {}
    member = {"model": model, "view": 0, "peft": LORA, **group}
    cfg = load_config({
        "members": [{"name": f"m{i}", **member} for i in range(members)],
        "reward_rule": "ring", "num_generations": GENERATIONS, "prompts_per_step": PROMPTS,
        "max_completion_length": TOKENS, "max_steps": steps, "output_dir": str(out),
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32},
        "trainer": {"learning_rate": 1e-4}, "distributed": {"port": _free_port()},
    }, CoRLConfig)  # fmt: skip
    start = time.perf_counter()
    with PeakChildMemory() as memory:
        launch_cohort(cfg, "corl")
    wall = time.perf_counter() - start
    times = [r["step_time"] for i in range(members) for r in read_metrics(cfg.member_dir(i) / "metrics.jsonl")
             if "step_time" in r and r["step"] > 1]  # fmt: skip
    return {"peak_rss_mib": round(memory.peak, 1), "step_s": round(statistics.median(times), 3),
            "wall_s": round(wall, 1)}  # fmt: skip


def generation(model: str, members: int, prompts_each: int = 8, repeats: int = 3) -> dict:
    """Tokens a second: one AdapterGenerator for every adapter against one generator per adapter."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators.adapters import AdapterGenerator
    from councilzoo.tasks import synthetic_problems

    names = [f"m{i}" for i in range(members)]
    fresh = {**LORA, "init_lora_weights": False}  # not the identity, so each adapter decodes its own way
    problems = synthetic_problems("numeric", prompts_each, seed=0)
    questions = [[{"role": "user", "content": p.question}] for p in problems]
    sampling = Sampling(max_new_tokens=32, temperature=1.0, seed=0)

    def tokens(results) -> int:
        return sum(c.completion_tokens for group in results for c in group)

    shared = AdapterGenerator(model, dict.fromkeys(names, fresh))
    apart = [AdapterGenerator(model, {n: fresh}) for n in names]
    adapters = [n for n in names for _ in questions]  # each adapter's block of the questions
    one, many = [], []
    for _ in range(repeats):  # alternating, best of each: the machine's load varies
        start = time.perf_counter()
        made = tokens(shared.generate(questions * members, 1, sampling, adapters=adapters))
        one.append(made / (time.perf_counter() - start))
        start = time.perf_counter()
        made = sum(tokens(g.generate(questions, 1, sampling)) for g in apart)
        many.append(made / (time.perf_counter() - start))
    one, many = max(one), max(many)
    return {"one_engine_tokens_per_s": round(one, 1), "n_engines_tokens_per_s": round(many, 1),
            "ratio": round(one / many, 3)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    parser.add_argument("--members", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "tiny":
            from councilzoo.testing import build_tiny_model

            model = str(build_tiny_model(Path(tmp) / "tiny"))
        else:
            from councilzoo.agents.generators import resolve_model_path

            model = resolve_model_path("smollm2-135m-instruct")
        load = os.getloadavg()
        rows = []
        output = Path(args.output or ROOT / "benchmarks" / "results" / f"shared_base_{args.model}.json")
        for n in args.members:
            alone = train(model, n, False, args.steps, Path(tmp) / f"separate{n}")
            together = train(model, n, True, args.steps, Path(tmp) / f"shared{n}")
            gen = generation(model, n)
            rows.append({
                "members": n, "separate_peak_rss_mib": alone["peak_rss_mib"],
                "shared_peak_rss_mib": together["peak_rss_mib"],
                "memory_ratio": round(together["peak_rss_mib"] / alone["peak_rss_mib"], 3),
                "separate_step_s": alone["step_s"], "shared_step_s": together["step_s"],
                "step_ratio": round(together["step_s"] / alone["step_s"], 3),
                "generation_ratio_one_engine_over_n": gen["ratio"], **{f"gen_{k}": v for k, v in gen.items()
                                                                       if k != "ratio"},
            })  # fmt: skip
            print(rows[-1], flush=True)
            loads = [[round(x, 2) for x in load], [round(x, 2) for x in os.getloadavg()]]
            result = {
                "model": args.model, "shape": [PROMPTS, GENERATIONS, TOKENS], "steps": args.steps,
                "rows": rows, "load_avg_before_after": loads, "cpus": os.cpu_count(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            }  # fmt: skip; written after each N, so a long run keeps what it measured
            output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
