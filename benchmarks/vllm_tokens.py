"""vLLM generation throughput: our VLLMGenerator against raw ``vllm.LLM.generate`` (and transformers).

Runs inside the vLLM environment, so that benchmarks/rollout_throughput.py (main environment)
can put vLLM's figure beside transformers':

    .venv-vllm/bin/python benchmarks/vllm_tokens.py [--model DIR|NAME] [--quick] [--no-transformers]
        [--output benchmarks/results/vllm_tokens_smollm2.json]

Without ``--model`` it builds the offline tiny model (councilzoo.testing) in a temporary folder;
``--model smollm2-135m-instruct`` measures the real model (``councilzoo.real_models``).
One timed call is ``prompts x n`` seeded samples of ``max_new_tokens`` tokens. On one engine,
``VLLMGenerator.generate`` and ``LLM.generate`` on the same token ids and sampling parameters
alternate ``--repeats`` times (the prefix cache is cleared before each call, so neither reads
the other's prefill); the best of each is reported, so that their ratio is our wrapper's
overhead. ``TransformersGenerator`` then runs the same call in the same process. Tokens are
completion tokens produced; every figure carries the machine load (``os.getloadavg()``) around
it. Prints a markdown table, then the result as one JSON line (the last line of stdout).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators import TransformersGenerator, VLLMGenerator
from councilzoo.agents.generators.chat_template import render_prompt
from councilzoo.agents.generators.sampling import prompt_seeds


def workload(prompts: int) -> list:
    return [[{"role": "user", "content": f"What is {i} + {i + 1}?"}] for i in range(prompts)]


def completion_tokens(out) -> int:
    return sum(c.completion_tokens for group in out for c in group)


def timed(call) -> dict:
    """One call: completion tokens, seconds and the 1-minute load before and after."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    tokens = call()
    seconds = time.perf_counter() - start
    return {"tokens": tokens, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1),
            "load_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}  # fmt: skip


def measure(model_dir: str, prompts: int, n: int, max_new_tokens: int, repeats: int = 5,
            transformers: bool = True, seed: int = 0, max_model_len: int | None = None) -> dict:  # fmt: skip
    length = {"max_model_len": max_model_len} if max_model_len else {}  # the CPU KV cache holds 64 MiB
    gen = VLLMGenerator(model_dir, dtype="float32", **length)
    batch = workload(prompts)
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
    # the same requests VLLMGenerator.generate builds, built once outside the timing
    requests = [gen._request(render_prompt(gen.tokenizer, p), []) for p in batch]
    params = [
        gen._vllm.SamplingParams(n=n, max_tokens=max_new_tokens, temperature=1.0, seed=s, logprobs=0)
        for s in prompt_seeds(seed, prompts)
    ]

    def ours() -> int:
        gen.llm.reset_prefix_cache()
        return completion_tokens(gen.generate(batch, n=n, sampling=sampling))

    def raw() -> int:
        gen.llm.reset_prefix_cache()
        outputs = gen.llm.generate(requests, params, use_tqdm=False)
        return sum(len(sample.token_ids) for output in outputs for sample in output.outputs)

    ours(), raw()  # warm-up at the timed batch shape: first calls allocate and warm the kernels
    runs = {"vllm_generator": [], "vllm_raw": []}
    for _ in range(repeats):  # alternate, so that a load change hits both sides alike
        runs["vllm_generator"].append(timed(ours))
        runs["vllm_raw"].append(timed(raw))
    best = {name: max(rs, key=lambda r: r["tokens_per_s"]) for name, rs in runs.items()}
    every_call = {name: [r["tokens_per_s"] for r in rs] for name, rs in runs.items()}
    if transformers:
        hf = TransformersGenerator(model_dir, device="cpu", dtype="float32")
        hf.generate(batch, n=n, sampling=sampling)  # warm-up
        best["transformers"] = timed(lambda: completion_tokens(hf.generate(batch, n=n, sampling=sampling)))
    ours_s, raw_s = best["vllm_generator"]["tokens_per_s"], best["vllm_raw"]["tokens_per_s"]
    result = {
        "backend": "vllm",
        "tokens_per_s": ours_s,
        "generator_vs_raw": round(ours_s / raw_s, 3),
        "rows": best,
        "tokens_per_s_every_call": every_call,
        "prompts": prompts, "n": n, "max_new_tokens": max_new_tokens, "repeats": repeats,
        "cpu_count": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip
    if transformers:
        result["vllm_vs_transformers"] = round(ours_s / best["transformers"]["tokens_per_s"], 3)
    return result


def table(result: dict) -> str:
    lines = [
        f"{result['prompts']} prompts x n={result['n']} x {result['max_new_tokens']} tokens, "
        f"{result['cpu_count']} CPUs, best of {result['repeats']} (vLLM)",
        "",
        "| generator | tokens | seconds | tokens/s | load (1 min) before, after |",
        "|---|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        lines.append(f"| {name} | {row['tokens']} | {row['seconds']:.2f} | {row['tokens_per_s']:.0f} | "
                     f"{row['load_1min'][0]:.2f}, {row['load_1min'][1]:.2f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: build the tiny model)")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per vLLM side")
    parser.add_argument("--no-transformers", action="store_true", help="time the vLLM sides only")
    parser.add_argument("--quick", action="store_true", help="16 prompts x 2 samples x 32 tokens")
    parser.add_argument("--output", help="also write the result (JSON) to this file")
    parser.add_argument("--max-model-len", type=int,
                        help="vLLM's context length (SmolLM2's 8192 overflows the CPU KV cache: pass 512)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # keep stdout to the table and JSON
    if args.quick:
        args.prompts, args.n, args.max_new_tokens = 16, 2, 32
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from councilzoo.testing import build_tiny_model

            model = str(build_tiny_model(f"{tmp}/tiny"))
        result = measure(model, args.prompts, args.n, args.max_new_tokens, args.repeats,
                         transformers=not args.no_transformers, max_model_len=args.max_model_len)  # fmt: skip
    result["model"] = args.model or "councilzoo tiny model"
    print(table(result))
    print(json.dumps(result))
    if args.output:
        with open(args.output, "w") as sink:
            json.dump(result, sink, indent=1)


if __name__ == "__main__":
    main()
