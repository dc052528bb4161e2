"""Greedy decoding of one model on transformers and on vLLM (CPU) at the same dtype, token by token.

    python scripts/greedy_parity.py --model smollm2-135m-instruct --limit 64 --out parity.json

Both backends decode the same chat prompts (cohort members' prompts for held-out items, the form
training evaluates) greedily through councilzoo's generators: transformers in this process, vLLM's
offline engine in the vLLM virtualenv (``.venv-vllm``, run as a child process of this script).
Prints how many replies are identical and, for the others, the first token where they part, with
the two top-token log-probabilities there (a near tie decided by rounding is the expected cause).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
VLLM_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1",
            "VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}


def prompts(args) -> list[list[dict]]:
    from councilzoo.agents.prompts import member_prompt
    from councilzoo.tasks import load_problems

    problems = load_problems(args.dataset, "test", size=args.limit, difficulty=args.difficulty)
    return [member_prompt(p, 0, style=args.prompt_style) for p in problems]


def decode(args) -> list[dict]:
    """Greedy token ids and log-probabilities of every prompt on ``args.backend``."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import make_generator

    spec = {"backend": args.backend, "model": args.model, "dtype": args.dtype}
    if args.backend == "vllm":
        spec |= {"enforce_eager": True, "kv_cache_memory_bytes": 256 << 20, "max_model_len": 1024}
    generator = make_generator(spec)
    greedy = Sampling(max_new_tokens=args.max_new_tokens, temperature=0.0)
    groups = generator.generate(prompts(args), n=1, sampling=greedy)
    return [{"token_ids": list(g[0].token_ids), "logprobs": list(g[0].logprobs or []), "text": g[0].text}
            for g in groups]


def compare(ours: list[dict], theirs: list[dict]) -> dict:
    """Identical replies, and where the others first differ (token index, both log-probabilities)."""
    parted = []
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a["token_ids"] == b["token_ids"]:
            continue
        k = next((j for j, (x, y) in enumerate(zip(a["token_ids"], b["token_ids"], strict=False)) if x != y),
                 min(len(a["token_ids"]), len(b["token_ids"])))
        lp = [r["logprobs"][k] if k < len(r["logprobs"]) else None for r in (a, b)]
        parted.append({"item": i, "first_different_token": k, "transformers_logprob": lp[0],
                       "vllm_logprob": lp[1]})
    return {"replies": len(ours), "identical": len(ours) - len(parted), "parted": parted}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--dataset", default="synthetic:word_problems")
    ap.add_argument("--difficulty", type=float, default=0.25)
    ap.add_argument("--prompt-style", default="concise")
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--backend", choices=["transformers", "vllm"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="write the comparison (or, with --backend, the decodes) here")
    args = ap.parse_args()
    if args.backend:  # one side, as a child process
        Path(args.out).write_text(json.dumps(decode(args)))
        return 0
    from councilzoo.agents.generators import resolve_model_path

    args.backend, args.model = "transformers", resolve_model_path(args.model)  # the child gets the folder
    ours = decode(args)
    with tempfile.TemporaryDirectory() as tmp:
        child = [str(VLLM_PYTHON), __file__, *sys.argv[1:], "--model", args.model, "--backend", "vllm",
                 "--out", f"{tmp}/vllm.json"]
        subprocess.run(child, check=True, env={**os.environ, **VLLM_ENV})
        theirs = json.loads(Path(f"{tmp}/vllm.json").read_text())
    result = {"model": args.model, "dtype": args.dtype, "max_new_tokens": args.max_new_tokens,
              **compare(ours, theirs)}
    print(f"{result['identical']}/{result['replies']} greedy replies identical at {args.dtype}")
    for row in result["parted"]:
        print(f"  item {row['item']}: first different token {row['first_different_token']}, "
              f"log-probabilities transformers {row['transformers_logprob']}, vLLM {row['vllm_logprob']}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
