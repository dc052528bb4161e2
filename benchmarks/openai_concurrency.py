"""The OpenAI-compatible backend against vLLM's CPU server: concurrent requests against one at a time.

Starts vLLM's OpenAI-compatible server (``.venv-vllm``, as the vllm test tier does:
``tests/vllm_server.py``) on the offline tiny model and times ``OpenAIGenerator.generate`` on 64
chat prompts x 1 seeded sample x ``--max-new-tokens`` tokens at ``max_concurrency`` 1 (one request
at a time), 8 (the default) and 64, alternating ``--repeats`` times (best call reported, every
call kept). The server batches whatever requests are in flight, so concurrency is what lets it
batch. Every figure has the 1-minute load before and after it.

    python benchmarks/openai_concurrency.py [--repeats 3] [--max-new-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "openai_concurrency.json"
CONCURRENCY = (1, 8, 64)
sys.path.insert(0, str(ROOT / "tests"))  # the server launcher the vllm tier uses


def generate_tokens(client, prompts: list, sampling) -> int:
    from vllm_tokens import completion_tokens

    return completion_tokens(client.generate(prompts, sampling=sampling))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()

    import vllm_server
    from vllm_tokens import timed, workload

    from councilzoo.agents import Sampling
    from councilzoo.agents.generators import OpenAIGenerator
    from councilzoo.testing import build_tiny_model

    sampling = Sampling(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)
    prompts = workload(64)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny")
        proc, url = vllm_server.start(model, Path(tmp) / "server.log")
        try:
            vllm_server.wait_healthy(proc, url, Path(tmp) / "server.log")
            clients = {c: OpenAIGenerator(f"{url}/v1", vllm_server.SERVED_NAME, max_concurrency=c)
                       for c in CONCURRENCY}  # fmt: skip
            for client in clients.values():  # warm-up: connections, the server's first batches
                client.generate(prompts, sampling=sampling)
            calls = {c: [] for c in CONCURRENCY}
            for _ in range(args.repeats):
                for c, client in clients.items():
                    calls[c].append(timed(partial(generate_tokens, client, prompts, sampling)))
        finally:
            vllm_server.kill(proc)
    rows = {c: max(rs, key=lambda r: r["tokens_per_s"]) for c, rs in calls.items()}
    result = {
        "prompts": len(prompts), "n": 1, "max_new_tokens": args.max_new_tokens, "repeats": args.repeats,
        "rows": {f"max_concurrency={c}": row for c, row in rows.items()},
        "tokens_per_s_every_call": {f"max_concurrency={c}": [r["tokens_per_s"] for r in rs]
                                    for c, rs in calls.items()},
        "default_vs_one_at_a_time": round(rows[8]["tokens_per_s"] / rows[1]["tokens_per_s"], 2),
    }  # fmt: skip
    print("| max_concurrency | tokens | seconds | tokens/s | load (1 min) before, after |")
    print("|---|---|---|---|---|")
    for c, row in rows.items():
        print(f"| {c} | {row['tokens']} | {row['seconds']:.2f} | {row['tokens_per_s']:.0f} | "
              f"{row['load_1min'][0]:.2f}, {row['load_1min'][1]:.2f} |")  # fmt: skip
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
