"""One vLLM engine serving N LoRA adapters of one base, against N engines of one merged model each:

    .venv-vllm/bin/python benchmarks/vllm_adapters.py [--model DIR|NAME] [--adapters 2 4] [--output FILE]

Without ``--model`` it builds the offline tiny model (councilzoo.testing) in a temporary folder. Each
adapter is LoRA r 8 on q, k, v, o with random weights. One engine: ``VLLMAdapterGenerator`` over the
base with the N adapters, every adapter's prompts in one call. N engines: each adapter merged into a
copy of the base (what a shared-base run without LoRA serving would deploy), one ``VLLMGenerator``
each, started one after the other in a process of its own, each decoding its adapter's prompts. The
same prompts (16 an adapter), seeded sampling of 4 completions of 32 tokens, a warm-up call first.
Throughput is tokens of the timed calls over their seconds; memory the resident set of each engine's
process after its calls (the N engines' summed: they would be resident together); start-up the
seconds to construct each engine. Ratios are one engine over N engines, in one run.
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

PROMPTS, SAMPLES, TOKENS = 16, 4, 32
LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}


def _prompts(adapter: int) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Agent {adapter}, problem {i}: what is {i} + {2 * i + 1}?"}]
            for i in range(PROMPTS)]


def _timed(generator, prompts: list, **adapters) -> tuple[int, float]:
    """Tokens and seconds of one seeded call, after a warm-up call at the same shapes."""
    from councilzoo.agents.base import Sampling

    sampling = Sampling(max_new_tokens=TOKENS, temperature=1.0, seed=0)
    generator.generate(prompts, n=SAMPLES, sampling=sampling, **adapters)
    start = time.perf_counter()
    out = generator.generate(prompts, n=SAMPLES, sampling=sampling, **adapters)
    return sum(c.completion_tokens for group in out for c in group), time.perf_counter() - start


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def one_engine(model: str, adapters: dict[str, str]) -> dict:
    """``VLLMAdapterGenerator`` with every adapter: start-up, one call of all prompts, memory."""
    from councilzoo.agents.generators.vllm_backend import VLLMAdapterGenerator

    start = time.perf_counter()
    engine = VLLMAdapterGenerator(model, adapters, dtype="float32")
    started = time.perf_counter() - start
    names = list(adapters)
    prompts = [p for i in range(len(names)) for p in _prompts(i)]
    tokens, seconds = _timed(engine, prompts, adapters=[name for name in names for _ in range(PROMPTS)])
    return {"start_s": started, "tokens": tokens, "seconds": seconds, "rss_mib": _rss_mib()}


def merged_engine(model: str, index: int) -> dict:
    """One ``VLLMGenerator`` over a merged model: start-up, its adapter's prompts, memory."""
    from councilzoo.agents.generators import VLLMGenerator

    start = time.perf_counter()
    engine = VLLMGenerator(model, dtype="float32")
    started = time.perf_counter() - start
    tokens, seconds = _timed(engine, _prompts(index))
    return {"start_s": started, "tokens": tokens, "seconds": seconds, "rss_mib": _rss_mib()}


def _in_process(*args: str) -> dict:
    """This script's ``--worker`` in a fresh process (one engine a process, as N servers would be)."""
    command = [sys.executable, __file__, "--worker", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def build(model: str, folder: Path, n: int) -> tuple[dict[str, str], list[str]]:
    """N random LoRA adapters of ``model`` (folders) and the N merged models (folders)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.agents.generators import resolve_model_path

    path = resolve_model_path(model)
    adapters, merged = {}, []
    for i in range(n):
        torch.manual_seed(i)
        base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        peft = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", init_lora_weights=False, **LORA))
        peft.save_pretrained(folder / f"adapter{i}")
        adapters[f"agent{i}"] = str(folder / f"adapter{i}")
        peft.merge_and_unload().save_pretrained(folder / f"merged{i}")
        AutoTokenizer.from_pretrained(path).save_pretrained(folder / f"merged{i}")
        merged.append(str(folder / f"merged{i}"))
    return adapters, merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model directory or registered name (default: build the tiny model)")
    parser.add_argument("--adapters", type=int, nargs="+", default=[2, 4])
    default = Path(__file__).parent / "results" / "vllm_adapters_tiny.json"
    parser.add_argument("--output", type=Path, default=default)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # one engine in this process: "one MODEL ADAPTERS_JSON" or "merged MODEL INDEX"
        kind, model, extra = args.worker
        measured = one_engine(model, json.loads(extra)) if kind == "one" else merged_engine(model, int(extra))
        print(json.dumps(measured))
        return
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from councilzoo.testing import build_tiny_model

            model = str(build_tiny_model(Path(tmp) / "tiny"))
        adapters, merged = build(model, Path(tmp), max(args.adapters))
        separate = [_in_process("merged", path, str(i)) for i, path in enumerate(merged)]
        rows = []
        for n in args.adapters:
            one = _in_process("one", model, json.dumps(dict(list(adapters.items())[:n])))
            many = separate[:n]
            many_tps = sum(r["tokens"] for r in many) / sum(r["seconds"] for r in many)
            rows.append({
                "adapters": n,
                "one_engine_tokens_per_s": round(one["tokens"] / one["seconds"], 1),
                "n_engines_tokens_per_s": round(many_tps, 1),
                "throughput_ratio": round(one["tokens"] / one["seconds"] / many_tps, 3),
                "one_engine_rss_mib": round(one["rss_mib"]),
                "n_engines_rss_mib": round(sum(r["rss_mib"] for r in many)),
                "memory_ratio": round(one["rss_mib"] / sum(r["rss_mib"] for r in many), 3),
                "one_engine_start_s": round(one["start_s"], 1),
                "n_engines_start_s": round(sum(r["start_s"] for r in many), 1),
            })  # fmt: skip
    result = {
        "model": args.model or "tiny",
        "shape": [PROMPTS, SAMPLES, TOKENS],
        "rows": rows,
        "load_avg_before_after": [list(load_before), list(os.getloadavg())],
        "cpus": os.cpu_count(),
    }
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
