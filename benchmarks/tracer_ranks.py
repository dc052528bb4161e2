"""TRACER's rollout time per round on a world of 1 and of 2 processes, in one run.

    python benchmarks/tracer_ranks.py [--rounds 3] [--repeats 2]

A round is one call of ``UtteranceLayer.rollout``: the step's review-v0 episodes (controllers
choose modes, counterfactual branches) played by the tiny LLM agents, the controllers' update on
the gathered step, then the candidates of the chosen speaking turns. Each world is started by
torchrun (gloo, CPU) from TRACER's placement plan and builds its trainer from the plan's settings;
each of its processes plays its share of the step's problems and samples its share of the turns.
One warm-up round, then ``--rounds`` timed rounds, a round timed until every rank has finished it;
the worlds alternate (1, 2, 1, 2, ...) and the ratio is the median seconds a round at 2 processes
over the median at 1. The tiny model is ``councilzoo.testing.build_tiny_model``; the load average
around each run is recorded, since the machine's cores may be shared. Results:
``benchmarks/results/tracer_ranks.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "tracer_ranks.json"
SHAPE = {"problems_per_step": 8, "turns_per_step": 4, "num_candidates": 4, "max_new_tokens": 32}


def tracer_config(model: str, out: str, processes: int):
    from councilzoo.config import load_config
    from councilzoo.learners.tracer.config import TracerConfig

    return load_config({
        "max_steps": 100, "problems_per_step": SHAPE["problems_per_step"], "output_dir": out, "save_steps": 0,
        "num_processes": processes, "env": {"rounds": 3, "lam": 0.01}, "baselines": ["never_review"],
        "agents": {"kind": "llm", "model": model, "max_new_tokens": SHAPE["max_new_tokens"]},
        "generation": {"enabled": True, "num_candidates": SHAPE["num_candidates"],
                       "turns_per_step": SHAPE["turns_per_step"], "minibatches": 1,
                       "trainer": {"learning_rate": 1e-5}, "peft": None},
        "data": {"synthetic_size": 64, "eval_limit": 4},
    }, TracerConfig)  # fmt: skip


def worker(model: str, out: str, processes: int, rounds: int, result: str) -> None:
    """One rank of the timed world: its trainer from the plan's settings, then the rounds."""
    import torch.distributed as dist

    from councilzoo.learners.placement import Machines, plan_tracer
    from councilzoo.learners.tracer.learner import Tracer

    cfg = tracer_config(model, out, processes)
    [world] = plan_tracer(cfg, "tracer", Machines.here()).worlds
    tracer = Tracer(cfg, trainer_settings=world.members[0].grpo)
    layer, acc = tracer.generation, tracer.generation.trainer.accelerator
    prompts = [None] * (SHAPE["turns_per_step"] * SHAPE["num_candidates"] // processes)
    layer.rollout(prompts, layer.trainer)  # warm-up
    seconds = []
    for _ in range(rounds):
        acc.wait_for_everyone()
        start = time.perf_counter()
        layer.rollout(prompts, layer.trainer)
        acc.wait_for_everyone()
        seconds.append(time.perf_counter() - start)
    if acc.is_main_process:
        Path(result).write_text(json.dumps(seconds))
    if dist.is_initialized():
        dist.destroy_process_group()


def run_world(model: str, tmp: Path, processes: int, rounds: int, repeat: int) -> dict:
    result = tmp / f"w{processes}-{repeat}.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes),
           "--standalone", __file__, "--worker", model,
           str(tmp / f"run{processes}-{repeat}"), str(processes), str(rounds), str(result)]  # fmt: skip
    load_before = os.getloadavg()[0]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    seconds = json.loads(result.read_text())
    return {"processes": processes, "repeat": repeat, "s_per_round": statistics.median(seconds),
            "rounds_s": [round(s, 3) for s in seconds], "load_1min_before": round(load_before, 2),
            "load_1min_after": round(os.getloadavg()[0], 2)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        model, out, processes, rounds, result = args.worker
        worker(model, out, int(processes), int(rounds), result)
        return 0
    from councilzoo.testing import build_tiny_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = str(build_tiny_model(tmp / "tiny"))
        for repeat in range(args.repeats):
            for processes in (1, 2):
                rows.append(run_world(model, tmp, processes, args.rounds, repeat))
                print(rows[-1], flush=True)
    median = {p: statistics.median(r["s_per_round"] for r in rows if r["processes"] == p) for p in (1, 2)}
    summary = {"median_s_per_round_1": median[1], "median_s_per_round_2": median[2],
               "ratio_2_over_1": median[2] / median[1], "cpus": os.cpu_count()}  # fmt: skip
    print(json.dumps(summary))
    config = {"model": "tiny (councilzoo.testing.build_tiny_model)", **SHAPE, "episodes_per_problem": 1,
              "rounds": args.rounds, "repeats": args.repeats, "backend": "transformers, gloo on CPU"}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps({"config": config, "table": rows, "summary": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
