"""The evaluation harness against an OpenAI-compatible endpoint: vLLM's CPU server, tiny model.

One server per module, serving the tiny model and three LoRA adapters of it: ``base``, whose update
is zero (the tiny model itself, served as an adapter: vLLM's CPU LoRA kernels give requests
without an adapter the last slot's adapter when they share a batch with adapter requests, see
docs/generators.md), and two random ones, ``alice`` and ``bob``: three members. Needs
the separate virtualenv built by scripts/setup_vllm_env.sh (.venv-vllm); skipped without it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import vllm_server
import yaml

from councilzoo.evaluation.harness import main

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ("base", "alice", "bob")


@pytest.fixture(scope="module")
def adapters(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """LoRA adapters of the tiny model: ``base`` with PEFT's zero update, two random ones."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out = {}
    for seed, name in enumerate(ADAPTERS):
        torch.manual_seed(seed)
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        modules = ["q_proj", "v_proj", "down_proj"]
        lora = LoraConfig(r=4, target_modules=modules, init_lora_weights=name == "base")
        out[name] = tmp_path_factory.mktemp("lora") / name
        get_peft_model(base, lora).save_pretrained(out[name])
    return out


@pytest.fixture(scope="module")
def server_root(tiny_model_dir, adapters, tmp_path_factory):
    """The server's root URL (no ``/v1``); the model is ``tiny``, its adapters are named as in ADAPTERS."""
    if not vllm_server.VLLM_PYTHON.exists():
        pytest.skip(vllm_server.SKIP_REASON)
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    lora = ["--enable-lora", "--max-loras", str(len(ADAPTERS)), "--max-lora-rank", "8",
            "--lora-modules", *(f"{name}={path}" for name, path in adapters.items())]  # fmt: skip
    proc, url = vllm_server.start(tiny_model_dir, log, tuple(lora))
    try:
        vllm_server.wait_healthy(proc, url, log)
        yield url
    finally:
        vllm_server.kill(proc)


@pytest.fixture(scope="module")
def server_url(server_root):
    return f"{server_root}/v1"


def test_eval_runs_against_the_vllm_endpoint(server_url, tmp_path):
    base_url, model = server_url, vllm_server.SERVED_NAME
    council = yaml.safe_load((ROOT / "configs" / "eval_openai.yaml").read_text())
    council["models"]["llm"]["kwargs"] = {"base_url": base_url, "model": model}
    council["models"]["llm"]["agent"] = {"sampling": {"max_new_tokens": 16, "temperature": 1.0}}
    council["samples"] = 2
    council["comed"] = {"dev_size": 10, "dev_split": "train"}
    config = tmp_path / "agents.yaml"
    config.write_text(yaml.safe_dump(council))
    args = argparse.Namespace(
        protocol="single,self_consistency,always_verify,debate,comed",
        agents=str(config),
        dataset="synthetic:numeric",
        split="test",
        path=None,
        dev_path=None,
        limit=6,
        out=str(tmp_path),
        seed=0,
        overwrite=False,
    )
    assert main(args) == 0
    protocols = json.loads((tmp_path / "report.json").read_text())["protocols"]
    assert protocols["single"]["calls"] == 1.0 and protocols["single"]["tokens"] > 0
    assert protocols["debate"]["calls"] == 6.0
    assert protocols["self_consistency"]["tokens"] > protocols["single"]["tokens"]
    for row in protocols.values():
        assert row["counts"]["rescue"] - row["counts"]["harm"] == (
            row["counts"]["accuracy"] - row["counts"]["anchor_accuracy"]
        )


# --- one server, many agents: three members, two evaluations, two games at once --------------
PROMPTS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "user", "content": "compute 17 modulo 5 and give the final answer \\boxed{ }"}],
]
LIMIT = 6  # problems, hence live envs and requests in flight per evaluation (n = 1 everywhere)
PROTOCOLS = ("debate", "always_verify")  # the two evaluations played at once on one server
# Seconds a request may take: a slow (loaded) server must not time one out, as the retry would
# send it twice, and the test counts the requests the server served.
PATIENCE = 600


def one_server_council(url: str) -> dict:
    """configs/eval_one_server.yaml pointed at the test server, with short turns."""
    council = yaml.safe_load((ROOT / "configs" / "eval_one_server.yaml").read_text())
    for name, spec in council["models"].items():
        spec["kwargs"] |= {"base_url": url, "model": name, "timeout": PATIENCE}
        spec["agent"]["sampling"]["max_new_tokens"] = 32  # ticks long enough to overlap
    return council


def evaluate_into(council: dict, protocol: str, out: Path) -> dict:
    """Play ``protocol`` with a fresh Evaluation; every run's episodes, by run name and key."""
    from councilzoo.config import load_config
    from councilzoo.evaluation.council import CouncilConfig
    from councilzoo.evaluation.harness import Evaluation, problems_for
    from councilzoo.rollout.log import EpisodeLog

    test = problems_for("synthetic:numeric", "test", LIMIT, seed=0)
    Evaluation(load_config(council, CouncilConfig), test, (), out, progress=False).result(protocol)
    return {path.stem: EpisodeLog(path).load() for path in sorted((out / "episodes").glob("*.jsonl"))}


def _turns(runs: dict) -> dict:
    return {
        (run, key, i): (t.agent, t.mode, t.text, t.answer, t.token_ids, t.cost)
        for run, records in runs.items() for key, r in records.items() for i, t in enumerate(r.turns)
    }  # fmt: skip


def _greedy_members(url: str) -> dict:
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import OpenAIGenerator

    greedy = Sampling(max_new_tokens=16, temperature=0.0)
    extra = {"return_tokens_as_token_ids": True}
    clients = {name: OpenAIGenerator(url, name, extra_body=extra, timeout=PATIENCE) for name in ADAPTERS}
    return {name: client.generate(PROMPTS, sampling=greedy) for name, client in clients.items()}


def _dedicated_members(tiny_model_dir: Path, adapters: dict) -> dict:
    """The same greedy call on each member alone, in this process: the tiny model for ``base``,
    copies with the adapter merged for the others."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import TransformersGenerator

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = {}
    for name in ADAPTERS:
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        if name != "base":
            model = PeftModel.from_pretrained(model, adapters[name]).merge_and_unload()
        gen = TransformersGenerator(model, tokenizer=tokenizer, dtype="float32")
        out[name] = gen.generate(PROMPTS, sampling=Sampling(max_new_tokens=16, temperature=0.0))
    return out


def _together(council: dict, server_root: str, server_url: str, out: Path) -> dict:
    """Both evaluations at once in threads, the greedy member calls beside them: their episodes,
    the members' replies, the server's counters before and after, and the peak of requests running."""
    import multiprocessing
    from concurrent.futures import ThreadPoolExecutor

    before = {m: vllm_server.metric(server_root, f"vllm:{m}_total")
              for m in ("request_success", "prompt_tokens", "generation_tokens")}  # fmt: skip
    context = multiprocessing.get_context("spawn")
    running, ready, stop = context.Value("d", 0.0), context.Event(), context.Event()
    watcher = context.Process(
        target=vllm_server.watch_peak, args=(server_root, "vllm:num_requests_running", running, ready, stop)
    )
    watcher.start()
    assert ready.wait(60), "the metrics watcher never read the server"
    try:
        with ThreadPoolExecutor(len(PROTOCOLS)) as pool:
            futures = {p: pool.submit(evaluate_into, council, p, out / p) for p in PROTOCOLS}
            members = _greedy_members(server_url)  # while the evaluations run
            together = {p: f.result() for p, f in futures.items()}
    finally:
        stop.set()
        watcher.join(30)
    after = {m: vllm_server.metric(server_root, f"vllm:{m}_total") for m in before}
    return {"runs": together, "members": members, "before": before, "after": after, "peak": running.value}



def test_one_server_serves_many_agents_protocols_and_games_at_once(
    server_root, server_url, tiny_model_dir, adapters, tmp_path
):
    """Two evaluations at once (debate: debate-v0 and escalation-v0; always_verify: escalation-v0),
    three members (LoRA adapters, greedy and seeded sampling) on one server.
    Each evaluation keeps at most LIMIT requests in flight, so more than LIMIT running on the
    server means the two evaluations' requests were batched together. Whether their bursts overlap
    is up to the OS scheduler (a loaded machine can run one evaluation's rounds between the
    other's), so the pair is played up to 3 times until the server shows the overlap. Every
    episode must equal the one played with the evaluation alone on the server; each member's
    greedy reply under that load must equal its own model's in this process; the server must have
    served exactly the requests and tokens the records account for (nothing sent twice)."""
    council = one_server_council(server_url)
    peaks = []
    for attempt in range(3):
        played = _together(council, server_root, server_url, tmp_path / f"shared{attempt}")
        peaks.append(played["peak"])
        if played["peak"] > LIMIT:
            break
    assert peaks[-1] > LIMIT, f"never more than {LIMIT} requests running at once in 3 tries: {peaks}"
    together, members, before, after = (played[k] for k in ("runs", "members", "before", "after"))
    alone = {p: evaluate_into(council, p, tmp_path / "alone" / p) for p in PROTOCOLS}

    assert {p: set(runs) for p, runs in together.items()} == {
        "debate": {"single", "debate"},
        "always_verify": {"always_verify"},
    }
    for p in PROTOCOLS:
        assert _turns(together[p]) == _turns(alone[p])
    turns = [t for runs in together.values() for records in runs.values() for r in records.values()
             for t in r.turns if t.token_ids is not None]  # fmt: skip
    direct = [c for out in members.values() for group in out for c in group]
    assert after["request_success"] - before["request_success"] == len(turns) + len(direct)
    assert after["prompt_tokens"] - before["prompt_tokens"] == sum(
        t.cost.prompt_tokens for t in turns) + sum(c.prompt_tokens for c in direct)  # fmt: skip
    assert after["generation_tokens"] - before["generation_tokens"] == sum(
        t.cost.completion_tokens for t in turns) + sum(c.completion_tokens for c in direct)  # fmt: skip
    debaters = {f"peer_{i}": name for i, name in enumerate(council["debaters"])}
    texts = {name: {t.text for r in together["debate"]["debate"].values() for t in r.turns
                    if debaters[t.agent] == name} for name in debaters.values()}  # fmt: skip
    assert not (texts["alice"] & texts["bob"]) and not (texts["alice"] & texts["base"])

    dedicated = _dedicated_members(tiny_model_dir, adapters)
    replies = {name: [c.token_ids for group in out for c in group] for name, out in members.items()}
    assert len({tuple(map(tuple, r)) for r in replies.values()}) == 3  # three different members
    for name, out in members.items():
        for [shared], [own] in zip(out, dedicated[name], strict=True):
            assert shared.token_ids == own.token_ids and shared.text == own.text
            assert shared.logprobs == pytest.approx(own.logprobs, abs=2e-3)
