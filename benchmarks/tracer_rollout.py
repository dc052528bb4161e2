"""TRACER's utterance rollouts with vLLM against the transformers path, in one run.

Runs inside the vLLM environment (it has both backends):

    .venv-vllm/bin/python benchmarks/tracer_rollout.py [--quick] [--model DIR] [--steps N]

A TRACER step with the utterance layer is one call of ``UtteranceLayer.rollout``: the step's
review-v0 episodes (controllers choose modes, counterfactual branches) played by the LLM agents,
then G candidates of the chosen speaking turns. Each backend runs in its own process with the same
config: ``generation.trainer.use_vllm`` on (TRL's colocated engine, shared by our rollouts) or off
(transformers on the trainer's model). One warm-up step, then ``--steps`` timed steps; tokens are
every completion token the agents' generator produced. Both sides draw their own samples (another
sampler), so episodes differ in length: tokens/s is the comparable figure. On a CPU, TRL's engine
gets the CPU settings TRL does not expose (``tests/test_trl_vllm.py``, workaround 1). Results:
``benchmarks/results/tracer_rollout.json`` with a summary ratio and the load around each run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "tracer_rollout.json"
SHAPES = {  # problems per step, turns per step, candidates, tokens per utterance
    "default": (16, 8, 4, 32),
    "quick": (4, 4, 4, 16),
}


def tracer_config(model: str, out: str, shape: tuple[int, int, int, int], vllm: bool):
    from councilzoo.config import load_config
    from councilzoo.learners.tracer.config import TracerConfig

    problems, turns, candidates, tokens = shape
    trainer = {"learning_rate": 1e-5}
    if vllm:
        trainer.update(use_vllm=True, vllm_mode="colocate", vllm_max_model_length=1024,
                       vllm_gpu_memory_utilization=0.3)
    return load_config({
        "max_steps": 100, "problems_per_step": problems, "output_dir": out, "save_steps": 0,
        "env": {"rounds": 3, "lam": 0.01}, "baselines": ["never_review"],
        "agents": {"kind": "llm", "model": model, "max_new_tokens": tokens, "temperature": 1.0},
        "generation": {"enabled": True, "num_candidates": candidates, "turns_per_step": turns,
                       "trainer": trainer, "peft": None},
        "data": {"synthetic_size": 64, "eval_limit": 4},
    }, TracerConfig)  # fmt: skip


def child(spec: dict) -> dict:
    """Time ``steps`` TRACER rollouts of one backend (after one warm-up step)."""
    import torch

    from councilzoo.agents.generators.transformers_backend import TransformersGenerator
    from councilzoo.agents.generators.vllm_backend import VLLMGenerator
    from councilzoo.learners.tracer.learner import Tracer

    if spec["vllm"] and not torch.cuda.is_available():
        sys.path.insert(0, str(ROOT / "tests"))
        from test_trl_vllm import _patch_colocate

        _patch_colocate()
    tokens = [0]
    for cls in (TransformersGenerator, VLLMGenerator):  # count every completion token produced
        def counted(self, prompts, n=1, sampling=None, seeds=None, _generate=cls.generate):
            out = _generate(self, prompts, n, sampling, seeds=seeds)
            tokens[0] += sum(c.completion_tokens for group in out for c in group)
            return out

        cls.generate = counted
    tracer = Tracer(tracer_config(spec["model"], spec["out"], tuple(spec["shape"]), spec["vllm"]))
    layer = tracer.generation
    _, turns, candidates, _ = spec["shape"]
    prompts = [None] * (turns * candidates)  # the dataset placeholder rows; rollout plays the step
    layer.rollout(prompts, layer.trainer)  # warm-up
    tokens[0] = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(spec["steps"]):
        layer.rollout(prompts, layer.trainer)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "backend": type(layer.generator).__name__, "steps": spec["steps"], "tokens": tokens[0],
        "seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "s_per_step": round(wall / spec["steps"], 3),
        "tokens_per_s": round(tokens[0] / wall, 1), "tokens_per_cpu_s": round(tokens[0] / cpu, 1),
        "load_1min_after": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a much smaller step (a smoke run)")
    parser.add_argument("--model", help="a model folder (default: the offline tiny model)")
    parser.add_argument("--steps", type=int, default=3, help="timed TRACER steps per backend")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.result).write_text(json.dumps(child(json.loads(args.child))))
        return 0
    shape = SHAPES["quick" if args.quick else "default"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.model:
            model = args.model
        else:
            from councilzoo.testing import build_tiny_model

            model = str(build_tiny_model(tmp / "tiny"))
        for name, vllm in (("transformers", False), ("vllm", True)):
            spec = {"model": model, "out": str(tmp / name), "shape": shape, "vllm": vllm, "steps": args.steps}
            result = tmp / f"{name}.json"
            load_before = round(os.getloadavg()[0], 2)
            subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(spec), "--result", str(result)],
                check=True, cwd=ROOT,
            )
            rows[name] = {**json.loads(result.read_text()), "load_1min_before": load_before}
    hf, vl = rows["transformers"], rows["vllm"]
    summary = {
        "vllm_over_transformers_tokens_per_s": round(vl["tokens_per_s"] / hf["tokens_per_s"], 3),
        "vllm_over_transformers_tokens_per_cpu_s": round(vl["tokens_per_cpu_s"] / hf["tokens_per_cpu_s"], 3),
        "s_per_step": {"transformers": hf["s_per_step"], "vllm": vl["s_per_step"]},
        "cpus": os.cpu_count(),
    }
    print("| TRACER utterance rollouts | steps | tokens | seconds | CPU s | tokens/s | load before-after |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        load = f"{r['load_1min_before']}-{r['load_1min_after']}"
        print(f"| {name} ({r['backend']}) | {r['steps']} | {r['tokens']:,} | {r['seconds']:.2f} | "
              f"{r['cpu_seconds']:.2f} | {r['tokens_per_s']:,.0f} | {load} |")
    print(json.dumps(summary))
    config = {"quick": args.quick, "model": args.model or "tiny (councilzoo.testing.build_tiny_model)",
              "problems_turns_candidates_tokens": shape, "rounds": 3, "steps": args.steps}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    result = {"config": config, "table": list(rows.values()), "summary": summary}
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
