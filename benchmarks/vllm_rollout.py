"""Rollout throughput with the vLLM backend: whole debate episodes against one call of their prompts.

Runs inside the vLLM environment; benchmarks/rollout_throughput.py runs it twice, with vLLM's
prefix cache on and off, and reports both beside transformers' figures:

    .venv-vllm/bin/python benchmarks/vllm_rollout.py --model DIR [--efficiency] [--no-prefix-caching]
                                                    [--profile FILE]

Every run plays debate-v0 (3 peers) through ``RolloutEngine`` at M = 64 envs with ``LLMAgent``
on one ``VLLMGenerator``, seeded sampling, ``--max-new-tokens`` a turn. Always: 3-round episodes
(the prefix-caching comparison: later turns re-send the transcript so far). With
``--efficiency`` also, in the same engine: the sequential loop (one call per turn), 2-round
episodes at M = 64 recording every turn prompt, and one call of all those prompts replayed;
``engine_efficiency`` is the episodes' tokens/s over the replay's (also per process CPU second,
which other load on a shared machine disturbs less). The prefix cache is cleared
before every timed run. ``--profile FILE`` writes cProfile stats of the 2-round M = 64 run
(timed apart from the others). Prints one JSON line; every figure has the load beside it.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import tempfile

from rollout_throughput import ENV_KWARGS, Recording, engine, replay_tokens_per_s, sequential

EPISODES, SEQUENTIAL_EPISODES, NUM_ENVS = 192, 12, 64


def row(name: str, result: tuple[int, int, float, float]) -> dict:
    episodes, tokens, seconds, cpu_seconds = result
    return {
        "run": name, "episodes": episodes, "tokens": tokens, "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3), "episodes_per_s": round(episodes / seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1), "load_1min_after": round(os.getloadavg()[0], 2),
    }  # fmt: skip


def measure(model: str, prefix_caching: bool, efficiency: bool, max_new_tokens: int, profile) -> dict:
    from councilzoo.agents import LLMAgent, Sampling
    from councilzoo.agents.generators import VLLMGenerator
    from councilzoo.tasks import synthetic_problems

    gen = VLLMGenerator(model, dtype="float32", enable_prefix_caching=prefix_caching)
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, seed=0)
    agent = LLMAgent(gen, sampling=sampling)
    problems = synthetic_problems("numeric", EPISODES, seed=0)
    three_rounds = {**ENV_KWARGS, "rounds": 3}
    engine(agent, problems[:NUM_ENVS], NUM_ENVS, three_rounds)  # warm-up at the timed batch shapes
    result = {"prefix_caching": prefix_caching, "max_new_tokens": max_new_tokens, "num_envs": NUM_ENVS,
              "cpu_count": os.cpu_count(), "rows": []}  # fmt: skip
    gen.llm.reset_prefix_cache()
    rows = result["rows"]
    rows.append(row("RolloutEngine M=64, 3 rounds", engine(agent, problems, NUM_ENVS, three_rounds)))
    if efficiency:
        gen.llm.reset_prefix_cache()
        seq = sequential(agent, problems[:SEQUENTIAL_EPISODES])
        rows.append(row("sequential (1 call per turn)", seq))
        recorded = LLMAgent(Recording(gen), sampling=sampling)
        gen.llm.reset_prefix_cache()
        rows.append(row("RolloutEngine M=64", engine(recorded, problems, NUM_ENVS)))
        prompts = recorded.generator.prompts
        gen.llm.reset_prefix_cache()
        replay, replay_cpu = replay_tokens_per_s(gen, prompts, sampling)
        m64, base = rows[-1], rows[-2]
        result |= {
            "replay_prompts": len(prompts), "replay_tokens_per_s": round(replay, 1),
            "replay_load_1min_after": round(os.getloadavg()[0], 2),
            "engine_efficiency": round(m64["tokens_per_s"] / replay, 3),
            "engine_efficiency_cpu_seconds": round(m64["tokens"] / m64["cpu_seconds"] / replay_cpu, 3),
            "speedup_m64_vs_sequential": round(m64["episodes_per_s"] / base["episodes_per_s"], 2),
            "speedup_m64_vs_sequential_cpu_seconds": round(
                (m64["episodes"] / m64["cpu_seconds"]) / (base["episodes"] / base["cpu_seconds"]), 2),
        }  # fmt: skip
    if profile:
        gen.llm.reset_prefix_cache()
        profiler = cProfile.Profile()
        profiler.runcall(engine, agent, problems, NUM_ENVS)
        profiler.dump_stats(profile)
    result["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: build the tiny model)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--no-prefix-caching", action="store_true")
    parser.add_argument("--efficiency", action="store_true", help="also the sequential loop and the replay")
    parser.add_argument("--profile", help="write cProfile stats of a 2-round M=64 run here")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # keep stdout to the JSON line
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from councilzoo.testing import build_tiny_model

            model = str(build_tiny_model(f"{tmp}/tiny"))
        caching = not args.no_prefix_caching
        result = measure(model, caching, args.efficiency, args.max_new_tokens, args.profile)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
