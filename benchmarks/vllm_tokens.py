"""vLLM generation throughput on one model, as one JSON line: {"tokens_per_s": ...}.

Runs inside the vLLM environment, so that benchmarks/rollout_throughput.py (main environment)
can put vLLM's figure beside transformers':

    .venv-vllm/bin/python benchmarks/vllm_tokens.py [--model DIR] [--quick]

Without ``--model`` it builds the offline tiny model (councilzoo.testing) in a temporary folder.
The timed call is the generator's ``generate`` on ``prompts x n`` sampled completions after
one warm-up call; tokens are the completion tokens actually produced. In the same run and
engine, ``raw`` times ``vllm.LLM.generate`` on the same token ids and sampling settings without
seeds (a seeded raw call of this size crashes vLLM's CPU build, see docs/generators.md), against
our generator's unseeded call: ``overhead_ratio`` = ours / raw tokens/s (target >= 0.95).
``load`` is the machine's load average before the run and ``cpus`` its core count.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators import VLLMGenerator
from councilzoo.agents.generators.common import render_prompt


def _timed(call) -> tuple[int, float]:
    start = time.perf_counter()
    tokens = call()
    return tokens, time.perf_counter() - start


def measure(model_dir: str, prompts: int, n: int, max_new_tokens: int, seed: int = 0) -> dict:
    load = os.getloadavg()[0]
    gen = VLLMGenerator(model_dir, dtype="float32")
    batch = [[{"role": "user", "content": f"What is {i} + {i + 1}?"}] for i in range(prompts)]
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
    gen.generate(batch[:2], sampling=Sampling(max_new_tokens=4, temperature=1.0, seed=seed))  # warm-up

    def ours(s: Sampling) -> int:
        return sum(c.completion_tokens for group in gen.generate(batch, n=n, sampling=s) for c in group)

    tokens, seconds = _timed(lambda: ours(sampling))
    unseeded = Sampling(max_new_tokens=max_new_tokens, temperature=1.0)
    ids = [render_prompt(gen.tokenizer, p) for p in batch]
    params = gen._vllm.SamplingParams(n=n, max_tokens=max_new_tokens, temperature=1.0, logprobs=0)

    def raw() -> int:
        requests = [gen._vllm.inputs.TokensPrompt(prompt_token_ids=i) for i in ids]
        outputs = gen.llm.generate(requests, [params] * len(ids), use_tqdm=False)
        return sum(len(s.token_ids) for o in outputs for s in o.outputs)

    # ours and raw alternate three times (the engine stays warm); best tokens/s of each
    ours_best = raw_best = 0.0
    for _ in range(3):
        t, s = _timed(lambda: ours(unseeded))
        ours_best = max(ours_best, t / s)
        t, s = _timed(raw)
        raw_best = max(raw_best, t / s)
    return {
        "backend": "vllm",
        "tokens_per_s": tokens / seconds,
        "tokens": tokens,
        "seconds": seconds,
        "prompts": prompts,
        "n": n,
        "max_new_tokens": max_new_tokens,
        "unseeded_tokens_per_s": ours_best,
        "raw_tokens_per_s": raw_best,
        "overhead_ratio": ours_best / raw_best,
        "load": load,
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: build the tiny model)")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="16 prompts x 2 samples x 32 tokens")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # keep stdout to the JSON line
    if args.quick:
        args.prompts, args.n, args.max_new_tokens = 16, 2, 32
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from councilzoo.testing import build_tiny_model

            model = str(build_tiny_model(f"{tmp}/tiny"))
        result = measure(model, args.prompts, args.n, args.max_new_tokens)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
