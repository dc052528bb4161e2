"""vLLM generation throughput on one model, as one JSON line: {"tokens_per_s": ...}.

Runs inside the vLLM environment, so that benchmarks/rollout_throughput.py (main environment)
can put vLLM's figure beside transformers':

    .venv-vllm/bin/python benchmarks/vllm_tokens.py [--model DIR] [--quick]

Without ``--model`` it builds the offline tiny model (councilzoo.testing) in a temporary folder.
The timed call is the generator's ``generate`` on ``prompts x n`` sampled completions after
one warm-up call; tokens are the completion tokens actually produced.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators import VLLMGenerator


def measure(model_dir: str, prompts: int, n: int, max_new_tokens: int, seed: int = 0) -> dict:
    gen = VLLMGenerator(model_dir, dtype="float32")
    batch = [[{"role": "user", "content": f"What is {i} + {i + 1}?"}] for i in range(prompts)]
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
    gen.generate(batch[:2], sampling=Sampling(max_new_tokens=4, temperature=1.0, seed=seed))  # warm-up
    start = time.perf_counter()
    out = gen.generate(batch, n=n, sampling=sampling)
    seconds = time.perf_counter() - start
    tokens = sum(c.completion_tokens for group in out for c in group)
    return {
        "backend": "vllm",
        "tokens_per_s": tokens / seconds,
        "tokens": tokens,
        "seconds": seconds,
        "prompts": prompts,
        "n": n,
        "max_new_tokens": max_new_tokens,
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
