"""Rollout throughput: RolloutEngine at M = 1, 8, 64 envs vs a sequential one-call-per-turn loop.

Subject: ``RolloutEngine`` playing debate-v0 (3 peers x 2 rounds) with ``LLMAgent`` on the
offline tiny transformers model, M envs in lockstep, one batched ``generate`` call per tick.
Baseline: the loop of the released TRACER code, one problem after another and one ``generate``
call per turn (``agent.act([context])``), same agent, env and sampling. Both sample every turn to
exactly ``max_new_tokens`` tokens of a random model, so the work per token is the same. Target:
>= 8x episodes/s at M = 64 on CPU. When ``.venv-vllm`` exists, one generate call of 64 prompts
on the same model is timed with the vLLM backend (in its own virtualenv, through
``benchmarks/vllm_tokens.py``) and with transformers, side by side, and
``benchmarks/vllm_rollout.py`` measures the vLLM backend's engine efficiency and sequential-loop
speedup, and 3-round debates with and without vLLM's prefix cache. Speedups are given in wall
clock and in process CPU seconds; the latter is robust to other load on a shared machine (with
``--threads 1`` it equals the wall clock of an idle single core). ``engine_efficiency``: the
M = 64 run's tokens/s over the same generator's tokens/s on one call of every turn prompt that
run sent, replayed (what the generator does when the episodes' turn-by-turn dependencies do not
stand in the way). The machine load (``os.getloadavg()``) is recorded beside each run.

    python benchmarks/rollout_throughput.py [--quick] [--threads N]
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
RESULT = ROOT / "benchmarks" / "results" / "rollout_throughput.json"
VLLM_PYTHON, VLLM_SCRIPT = ROOT / ".venv-vllm" / "bin" / "python", ROOT / "benchmarks" / "vllm_tokens.py"
VLLM_ROLLOUT = ROOT / "benchmarks" / "vllm_rollout.py"
ENV_ID, ENV_KWARGS = "councilzoo/debate-v0", {"num_agents": 3, "rounds": 2}
TARGET_SPEEDUP = 8.0


def sequential(agent, problems, env_kwargs=ENV_KWARGS) -> tuple[int, int, float, float]:
    """The baseline: one env, one problem at a time, one generate call per turn."""
    from councilzoo.envs import make

    env = make(ENV_ID, **env_kwargs).unwrapped
    tokens, start, cpu = 0, time.perf_counter(), time.process_time()
    for problem in problems:
        env.reset(options={"problem": problem})
        while not all(env.terminations.values()):
            env.step(agent.act([env.turn_context(env.agent_selection)])[0])
        tokens += env.episode_record().cost.completion_tokens
    return len(problems), tokens, time.perf_counter() - start, time.process_time() - cpu


class Recording:
    """A generator that records the prompts of every call (``n`` copies each), for the replay."""

    def __init__(self, generator):
        self.generator, self.prompts = generator, []

    def generate(self, prompts, n=1, sampling=None):
        self.prompts.extend(p for p in prompts for _ in range(n))
        return self.generator.generate(prompts, n=n, sampling=sampling)


def replay_tokens_per_s(generator, prompts: list, sampling) -> tuple[float, float]:
    """The generator's tokens per second of wall clock and per process CPU second on one call of
    ``prompts``."""
    start, cpu = time.perf_counter(), time.process_time()
    out = generator.generate(prompts, n=1, sampling=sampling)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    tokens = sum(c.completion_tokens for group in out for c in group)
    return tokens / seconds, tokens / cpu_seconds


def engine(agent, problems, num_envs: int, env_kwargs=ENV_KWARGS) -> tuple[int, int, float, float]:
    from councilzoo.rollout import RolloutEngine

    rollout = RolloutEngine(ENV_ID, {"peer": agent}, num_envs=num_envs, env_kwargs=env_kwargs, progress=False)
    start, cpu = time.perf_counter(), time.process_time()
    records = rollout.run(problems)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return len(records), sum(r.cost.completion_tokens for r in records), seconds, cpu_seconds


def vllm_prompts(count: int) -> list:
    """The workload of benchmarks/vllm_tokens.py, to time transformers on the same calls."""
    return [[{"role": "user", "content": f"What is {i} + {i + 1}?"}] for i in range(count)]


def generator_tokens_per_s(generator, max_new_tokens: int, prompts: int = 64) -> float:
    from councilzoo.agents import Sampling

    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, seed=0)
    start = time.perf_counter()
    out = generator.generate(vllm_prompts(prompts), n=1, sampling=sampling)
    return sum(c.completion_tokens for group in out for c in group) / (time.perf_counter() - start)


def in_vllm_env(script: Path, *args: str) -> dict | None:
    """The JSON line a benchmark script prints when run in the vLLM virtualenv (None without it),
    on this checkout's code (PYTHONPATH), or the last line of its error."""
    if not VLLM_PYTHON.exists():
        return None
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [str(VLLM_PYTHON), str(script), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT, env=env)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit code {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def vllm_summary(prefix_caching: dict, no_prefix_caching: dict) -> dict:
    """The vLLM headline figures: engine efficiency and speedup (prefix caching on), and the
    3-round debate tokens/s with and without prefix caching."""
    if "rows" not in prefix_caching or "rows" not in no_prefix_caching:
        return {}
    on, off = prefix_caching["rows"][0], no_prefix_caching["rows"][0]  # the 3-round runs
    keys = ("engine_efficiency", "engine_efficiency_cpu_seconds", "speedup_m64_vs_sequential",
            "speedup_m64_vs_sequential_cpu_seconds")
    return {
        **{f"vllm_{key}": prefix_caching[key] for key in keys},
        "vllm_3_rounds_tokens_per_s": {
            "prefix_caching": on["tokens_per_s"], "no_prefix_caching": off["tokens_per_s"],
            "load_1min_after": [on["load_1min_after"], off["load_1min_after"]],
        },
        "vllm_3_rounds_tokens_per_cpu_s": {
            "prefix_caching": round(on["tokens"] / on["cpu_seconds"], 1),
            "no_prefix_caching": round(off["tokens"] / off["cpu_seconds"], 1),
        },
        "vllm_prefix_caching_speedup_3_rounds": round(on["tokens_per_s"] / off["tokens_per_s"], 3),
        "vllm_prefix_caching_speedup_3_rounds_cpu_seconds": round(
            (on["tokens"] / on["cpu_seconds"]) / (off["tokens"] / off["cpu_seconds"]), 3),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer problems and tokens (a smoke run)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()

    import torch

    from councilzoo.agents import LLMAgent, Sampling, TransformersGenerator
    from councilzoo.tasks import synthetic_problems
    from councilzoo.testing import build_tiny_model

    if args.threads:
        torch.set_num_threads(args.threads)
    max_new_tokens = 16 if args.quick else 32
    n_small, n_large = (4, 64) if args.quick else (12, 192)
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "tiny")
        agent = LLMAgent(TransformersGenerator(model_dir, device="cpu"), sampling=sampling)
        problems = synthetic_problems("numeric", n_large, seed=0)
        agent.act([_warm_context(problems[0])])  # first-call overheads are not throughput
        runs, loads = {"sequential (1 call per turn)": sequential(agent, problems[:n_small])}, {}
        loads["sequential (1 call per turn)"] = os.getloadavg()[0]
        recorded = LLMAgent(Recording(agent.generator), sampling=sampling)
        for m in (1, 8, 64):
            runs[f"RolloutEngine M={m}"] = engine(recorded if m == 64 else agent,
                                                  problems[: n_small if m == 1 else n_large], m)  # fmt: skip
            loads[f"RolloutEngine M={m}"] = os.getloadavg()[0]
        replay, replay_cpu = replay_tokens_per_s(agent.generator, recorded.generator.prompts, sampling)
        replay_load = os.getloadavg()[0]
        vllm, vllm_rollout, hf_generate = None, None, None
        if not args.quick:
            vllm = in_vllm_env(VLLM_SCRIPT, "--model", str(model_dir), "--prompts", "64", "--n", "1",
                               "--max-new-tokens", str(max_new_tokens))  # fmt: skip
        if vllm:
            hf_generate = generator_tokens_per_s(agent.generator, max_new_tokens)
            model = ("--model", str(model_dir), "--max-new-tokens", str(max_new_tokens))
            vllm_rollout = {
                "prefix_caching": in_vllm_env(VLLM_ROLLOUT, *model, "--efficiency"),
                "no_prefix_caching": in_vllm_env(VLLM_ROLLOUT, *model, "--no-prefix-caching"),
            }

    base = runs["sequential (1 call per turn)"]
    table = []
    for name, (episodes, tokens, seconds, cpu_seconds) in runs.items():
        table.append({
            "run": name, "episodes": episodes, "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu_seconds, 3),
            "episodes_per_s": round(episodes / seconds, 3), "tokens_per_s": round(tokens / seconds, 1),
            "speedup": round(episodes / seconds / (base[0] / base[2]), 2),
            "speedup_cpu": round(episodes / cpu_seconds / (base[0] / base[3]), 2),
            "load_1min_after": round(loads[name], 2),
        })
    print(f"{'run':30s} {'episodes':>8s} {'seconds':>8s} {'episodes/s':>11s} {'tokens/s':>10s} "
          f"{'speedup':>8s} {'speedup (CPU s)':>16s}")
    for row in table:
        print(f"{row['run']:30s} {row['episodes']:8d} {row['seconds']:8.2f} {row['episodes_per_s']:11.2f} "
              f"{row['tokens_per_s']:10.1f} {row['speedup']:7.2f}x {row['speedup_cpu']:15.2f}x")
    m64, m64_tokens = table[-1], runs["RolloutEngine M=64"][1]
    summary = {
        "speedup_m64_vs_sequential": m64["speedup"],
        "speedup_m64_vs_sequential_cpu_seconds": m64["speedup_cpu"],
        "target_speedup": TARGET_SPEEDUP, "meets_target": m64["speedup"] >= TARGET_SPEEDUP,
        "transformers_tokens_per_s_m64": m64["tokens_per_s"],
        "replay_tokens_per_s": round(replay, 1), "replay_prompts": len(recorded.generator.prompts),
        "replay_load_1min_after": round(replay_load, 2),
        "engine_efficiency": round(m64["tokens_per_s"] / replay, 3),
        "engine_efficiency_cpu_seconds": round(m64_tokens / m64["cpu_seconds"] / replay_cpu, 3),
        "vllm": vllm if vllm is not None else "skipped (no .venv-vllm, or --quick)",
    }
    if vllm_rollout is not None:
        summary["vllm_rollout"] = vllm_rollout
        summary |= vllm_summary(**vllm_rollout)
    if isinstance(vllm, dict) and "tokens_per_s" in vllm:
        summary["transformers_generate_tokens_per_s"] = round(hf_generate, 1)
        summary["vllm_vs_transformers_generate"] = round(vllm["tokens_per_s"] / hf_generate, 2)
        print(f"one generate call, 64 prompts x {max_new_tokens} tokens: vLLM {vllm['tokens_per_s']:.1f} "
              f"tokens/s, transformers {hf_generate:.1f} tokens/s")
    print(f"engine efficiency at M=64: {m64['tokens_per_s']:.1f} tokens/s in episodes / {replay:.1f} on one "
          f"call of their {summary['replay_prompts']} turn prompts = {summary['engine_efficiency']:.2f}")
    print(f"speedup at M=64: {m64['speedup']:.1f}x wall clock, {m64['speedup_cpu']:.1f}x in process CPU "
          f"seconds (target >= {TARGET_SPEEDUP:.0f}x)")
    config = {"env": ENV_ID, "env_kwargs": ENV_KWARGS, "max_new_tokens": max_new_tokens, "quick": args.quick,
              "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count()}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps({"config": config, "table": table, "summary": summary}, indent=2) + "\n")
    return 0


def _warm_context(problem):
    from councilzoo.envs.types import Mode, TurnContext

    return TurnContext(0, "peer_0", "peer", 1, problem, (), (Mode.SPEAK,), None, {})


if __name__ == "__main__":
    sys.exit(main())
