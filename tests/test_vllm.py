"""The vLLM tier: vLLM's engine and its OpenAI-compatible server against TransformersGenerator.

vLLM lives in its own environment (.venv-vllm, built by ``scripts/setup_vllm_env.sh``) because
its CPU build pins older torch/transformers. The tests run in the main environment; the vLLM
side runs in .venv-vllm's python: this file doubles as the worker script
(``.venv-vllm/bin/python tests/test_vllm.py OUT.json MODEL_DIR``), which writes every engine
result to JSON in one process so the engine starts once. The server is started once per module
and killed by the last test (the fault test). About 3 minutes on 2 busy cores.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import vllm_server
from vllm_server import VLLM_PYTHON

ENGINE = {"dtype": "float32"}  # the tiny model is float32; vLLM would run CPU models in bf16
PROMPTS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [
        {"role": "system", "content": "You are a reviewer."},
        {"role": "user", "content": "Verdict: RIGHT or WRONG"},
    ],
    "<|im_start|>user\nhow many apples<|im_end|>\n<|im_start|>assistant\n",
    [{"role": "user", "content": "compute 17 modulo 5 and give the final answer \\boxed{ }"}],
]
MAX_NEW = 24
# 64 prompts x n=4 = 256 sequences of ~134 prompt tokens: ~34,000 prefill tokens, over vLLM's
# default 4,096-token step budget, so a chunking engine would split some seeded prefills.
SHARED = "You are one of three peers in a debate. Answer in one line and end with the number. "
BIG_BATCH = [[{"role": "user", "content": f"{SHARED * 2}Problem {i}: {i} + {i + 1}?"}] for i in range(64)]


def perturb(state_dict: dict) -> dict:
    """The RL-style update both sides apply: flip the output head, rescale one inner layer."""
    changed = {"lm_head.weight": -1.0, "model.layers.0.mlp.down_proj.weight": 3.0}
    return {name: tensor * changed.get(name, 1.0) for name, tensor in state_dict.items()}


def _summary(out) -> list[dict]:
    return [
        {
            "token_ids": c.token_ids,
            "logprobs": c.logprobs,
            "text": c.text,
            "finish_reason": c.finish_reason,
            "prompt_token_ids": c.prompt_token_ids,
            "completion_tokens": c.completion_tokens,
        }
        for group in out
        for c in group
    ]


def run_engine_checks(model_dir: str) -> dict:
    """Everything the engine must show, in one engine lifetime (runs inside .venv-vllm)."""
    from safetensors.torch import load_file

    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import VLLMGenerator

    gen = VLLMGenerator(model_dir, **ENGINE)
    greedy = Sampling(max_new_tokens=MAX_NEW, temperature=0.0)
    sampled = Sampling(max_new_tokens=MAX_NEW, temperature=1.0, seed=7)
    result = {
        "greedy": _summary(gen.generate(PROMPTS, sampling=greedy)),
        "sampled": _summary(gen.generate(PROMPTS, n=3, sampling=sampled)),
        "sampled_again": _summary(gen.generate(PROMPTS, n=3, sampling=sampled)),
        "stop_length": _summary(gen.generate(PROMPTS, sampling=Sampling(max_new_tokens=5, temperature=0.0))),
    }
    result.update(_big_seeded_checks(gen))
    original = load_file(str(Path(model_dir) / "model.safetensors"))
    gen.load_weights(perturb(original))
    result["perturbed"] = _summary(gen.generate(PROMPTS, sampling=greedy))
    gen.load_weights(model_dir)
    result["restored"] = _summary(gen.generate(PROMPTS, sampling=greedy))
    result.update(_lora_sync_checks(gen, model_dir, greedy))
    return result


def _big_seeded_checks(gen) -> dict:
    """256 seeded sequences in one call, twice (the second reads the prefix cache)."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators.chat_template import render_prompt

    sampling = Sampling(max_new_tokens=8, temperature=1.0, seed=11)
    runs = [
        [c.token_ids for group in gen.generate(BIG_BATCH, n=4, sampling=sampling) for c in group]
        for _ in range(2)
    ]
    ids = [render_prompt(gen.tokenizer, p) for p in BIG_BATCH]
    replay_params = gen._vllm.SamplingParams(max_tokens=1)
    [replay] = gen.llm.generate(gen._request(ids[0], []), replay_params, use_tqdm=False)
    return {
        "big_seeded": runs[0],
        "big_seeded_again": runs[1],
        "big_prompt_tokens": sum(map(len, ids)),
        "replay_prompt_tokens": len(ids[0]),
        "replay_cached_tokens": replay.num_cached_tokens,
        "chunked_prefill": gen.llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill,
        "step_token_budget": gen.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens,
    }


def _lora_sync_checks(gen, model_dir: str, greedy) -> dict:
    """RL sync of a LoRA policy: the engine must then generate what the merged policy generates,
    and the policy must keep training on unmerged adapters."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.agents.generators import TransformersGenerator

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    lora_cfg = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    policy = get_peft_model(base, lora_cfg)
    gen.sync_weights(policy)
    still_unmerged = not any(getattr(m, "merged", False) for m in policy.modules())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    reference = TransformersGenerator(policy, tokenizer=tokenizer, dtype="float32")
    return {
        "lora_synced": _summary(gen.generate(PROMPTS, sampling=greedy)),
        "lora_reference": _summary(reference.generate(PROMPTS, sampling=greedy)),
        "lora_still_unmerged": still_unmerged,
    }


def run_adapter_checks(model_dir: str, folder: Path) -> dict:
    """One engine serving two LoRA adapters of the tiny model (runs inside .venv-vllm): its rows
    against PEFT's (``AdapterGenerator``), before and after adapter a alone is pushed."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators.adapters import BASE, AdapterGenerator
    from councilzoo.agents.generators.vllm_backend import VLLMAdapterGenerator

    def base_model():
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)

    folders = {}
    for i, name in enumerate(("a", "b")):  # random B matrices: each adapter changes the replies
        torch.manual_seed(i)
        lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
        get_peft_model(base_model(), lora).save_pretrained(folder / name)
        folders[name] = str(folder / name)
    greedy = Sampling(max_new_tokens=MAX_NEW, temperature=0.0)
    names = ["a", "b", BASE, "a"]
    engine = VLLMAdapterGenerator(model_dir, folders, **ENGINE)
    peft_side = AdapterGenerator(model_dir, folders, dtype="float32")
    result = {
        "mixed": _summary(engine.generate(PROMPTS, sampling=greedy, adapters=names)),
        "mixed_reference": _summary(peft_side.generate(PROMPTS, sampling=greedy, adapters=names)),
        "seat_b": _summary(engine.seat("b").generate(PROMPTS, sampling=greedy)),
        "seat_b_reference": _summary(peft_side.seat("b").generate(PROMPTS, sampling=greedy)),
    }
    policy = PeftModel.from_pretrained(base_model(), folders["a"], adapter_name="a", is_trainable=True)
    with torch.no_grad():  # an update of adapter a alone
        for parameter_name, parameter in policy.named_parameters():
            if "lora_B" in parameter_name:
                parameter.mul_(-2.0)
    engine.load_adapter("a", policy)
    updated = AdapterGenerator(policy, {}, tokenizer=AutoTokenizer.from_pretrained(model_dir))
    pushed = Path(engine._loras["a"].lora_path)
    result.update(
        updated=_summary(engine.seat("a").generate(PROMPTS, sampling=greedy)),
        updated_reference=_summary(updated.seat("a").generate(PROMPTS, sampling=greedy)),
        pushed_bytes=sum(f.stat().st_size for f in pushed.iterdir()),
        model_bytes=(Path(model_dir) / "model.safetensors").stat().st_size,
    )
    return result


# --- tests (main environment) --------------------------------------------------------------

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=vllm_server.SKIP_REASON),
]


@pytest.fixture(scope="module")
def engine(tiny_model_dir, tmp_path_factory, server_boot) -> dict:
    """The worker's results; ``server_boot`` is requested only to overlap the two start-ups."""
    out = tmp_path_factory.mktemp("vllm") / "engine.json"
    return vllm_server.run_worker(__file__, out, str(tiny_model_dir))


@pytest.fixture(scope="module")
def adapter_engine(tiny_model_dir, tmp_path_factory) -> dict:
    """``run_adapter_checks``' results, from a worker of its own (an engine started with LoRA)."""
    out = tmp_path_factory.mktemp("vllm_adapters") / "adapters.json"
    return vllm_server.run_worker(__file__, out, str(tiny_model_dir), "adapters")


@pytest.fixture(scope="module")
def reference(tiny_model_dir):
    from councilzoo.agents.generators import TransformersGenerator

    return TransformersGenerator(tiny_model_dir, dtype="float32")


def _greedy(gen, max_new_tokens=MAX_NEW):
    from councilzoo.agents.base import Sampling

    return _summary(gen.generate(PROMPTS, sampling=Sampling(max_new_tokens=max_new_tokens, temperature=0.0)))


def _assert_same_tokens(vllm_side: list[dict], hf_side: list[dict]):
    for v, h in zip(vllm_side, hf_side, strict=True):
        assert v["prompt_token_ids"] == h["prompt_token_ids"]
        assert v["token_ids"] == h["token_ids"]
        assert v["text"] == h["text"]
        assert v["finish_reason"] == h["finish_reason"]
        assert v["logprobs"] == pytest.approx(h["logprobs"], abs=2e-3)


def test_engine_greedy_equals_transformers(engine, reference):
    _assert_same_tokens(engine["greedy"], _greedy(reference))
    _assert_same_tokens(engine["stop_length"], _greedy(reference, 5))
    assert all(c["finish_reason"] == "length" and c["completion_tokens"] == 5 for c in engine["stop_length"])


def test_engine_samples_are_seeded(engine):
    assert [c["token_ids"] for c in engine["sampled"]] == [c["token_ids"] for c in engine["sampled_again"]]
    for i in range(len(PROMPTS)):  # 3 distinct samples per prompt, each with its logprobs
        group = engine["sampled"][3 * i : 3 * i + 3]
        assert len({tuple(c["token_ids"]) for c in group}) == 3
        assert all(len(c["logprobs"]) == c["completion_tokens"] == len(c["token_ids"]) for c in group)


def test_engine_seeded_samples_at_any_batch_size(engine):
    """256 seeded sequences with more prompt tokens than vLLM's default step budget: no crash
    (a chunked seeded prefill rewinds a CPU generator, which raises), same seed same samples."""
    assert not engine["chunked_prefill"] and engine["big_prompt_tokens"] * 4 > 4096
    assert len(engine["big_seeded"]) == 256
    assert engine["big_seeded"] == engine["big_seeded_again"]
    assert len({tuple(ids) for ids in engine["big_seeded"]}) > 200  # per-prompt seeds, distinct samples


def test_engine_prefix_cache_is_read(engine):
    """A prompt sent before is read from the prefix cache (whole blocks of it)."""
    assert 0 < engine["replay_cached_tokens"] <= engine["replay_prompt_tokens"]


def test_engine_logprobs_are_those_of_the_sampling_distribution(engine, reference):
    import torch

    for c in engine["sampled"]:  # temperature 1, top-p 1: the model's plain softmax
        ids = torch.tensor([c["prompt_token_ids"] + c["token_ids"]])
        with torch.no_grad():
            logits = reference.model(ids).logits[0, len(c["prompt_token_ids"]) - 1 : -1]
        expected = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(c["token_ids"])[:, None])
        assert c["logprobs"] == pytest.approx(expected.squeeze(1).tolist(), abs=2e-3)


def test_engine_weight_reload(engine, reference, tiny_model_dir):
    """Pushed weights change the output exactly as they change transformers'; the originals
    loaded back from disk restore it."""
    import torch
    from safetensors.torch import load_file

    from councilzoo.agents.generators import TransformersGenerator

    perturbed = TransformersGenerator(tiny_model_dir, dtype="float32")
    perturbed.model.load_state_dict(perturb(load_file(str(tiny_model_dir / "model.safetensors"))))
    with torch.no_grad():
        expected = _greedy(perturbed)
    assert [c["token_ids"] for c in engine["perturbed"]] != [c["token_ids"] for c in engine["greedy"]]
    _assert_same_tokens(engine["perturbed"], expected)
    _assert_same_tokens(engine["restored"], _greedy(reference))


def test_engine_sync_weights_from_a_lora_policy(engine):
    assert engine["lora_still_unmerged"]
    assert [c["token_ids"] for c in engine["lora_synced"]] != [c["token_ids"] for c in engine["greedy"]]
    _assert_same_tokens(engine["lora_synced"], engine["lora_reference"])


def test_one_engine_serves_each_adapter_of_a_shared_base_as_peft_does(adapter_engine):
    """Prompts of adapters a and b and of the bare base in one call: each row is PEFT's row for its
    adapter; a seat of one adapter likewise."""
    _assert_same_tokens(adapter_engine["mixed"], adapter_engine["mixed_reference"])
    rows = [c["token_ids"] for c in adapter_engine["mixed"]]
    assert len({tuple(r) for r in rows[:3]}) == 3  # a, b and the base reply differently
    _assert_same_tokens(adapter_engine["seat_b"], adapter_engine["seat_b_reference"])


def test_an_update_pushes_only_the_adapter_and_the_engine_serves_the_new_weights(adapter_engine):
    before = [c["token_ids"] for c in adapter_engine["mixed"]][0]
    assert [c["token_ids"] for c in adapter_engine["updated"]][0] != before
    _assert_same_tokens(adapter_engine["updated"], adapter_engine["updated_reference"])
    assert adapter_engine["pushed_bytes"] < adapter_engine["model_bytes"] / 10  # the adapter, not a model


# --- the OpenAI-compatible server ----------------------------------------------------------


@pytest.fixture(scope="module")
def server_boot(tiny_model_dir, tmp_path_factory):
    """Start the server without waiting, so that it boots while the engine worker runs."""
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    proc, url = vllm_server.start(tiny_model_dir, log)
    yield proc, url, log
    vllm_server.kill(proc)


@pytest.fixture(scope="module")
def server(server_boot):
    """The booted server once /health answers: (process, base URL with /v1)."""
    proc, url, log = server_boot
    vllm_server.wait_healthy(proc, url, log)
    return proc, f"{url}/v1"


def test_server_greedy_equals_transformers(server, reference):
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import OpenAIGenerator

    _, url = server
    client = OpenAIGenerator(
        url, vllm_server.SERVED_NAME, extra_body={"return_tokens_as_token_ids": True}, max_concurrency=4
    )
    out = client.generate(PROMPTS, n=2, sampling=Sampling(max_new_tokens=MAX_NEW, temperature=0.0))
    for group, [expected] in zip(
        out,
        reference.generate(PROMPTS, sampling=Sampling(max_new_tokens=MAX_NEW, temperature=0.0)),
        strict=True,
    ):
        for c in group:
            assert c.token_ids == expected.token_ids
            assert c.text == expected.text
            assert c.prompt_tokens == expected.prompt_tokens
            assert c.completion_tokens == expected.completion_tokens
            assert c.logprobs == pytest.approx(expected.logprobs, abs=2e-3)


def test_server_killed_mid_run_raises_after_retries_and_keeps_finished_work(server):
    """Must run last in this module: it kills the shared server."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import GenerationError, OpenAIGenerator

    proc, url = server
    client = OpenAIGenerator(url, vllm_server.SERVED_NAME, max_retries=2, backoff=0.05, timeout=10)
    sampling = Sampling(max_new_tokens=8, temperature=1.0, seed=0)
    finished, error = [], None
    for step in range(6):
        if step == 3:
            vllm_server.kill(proc)
        try:
            finished.append(client.generate(PROMPTS, sampling=sampling))
        except GenerationError as exc:
            error = exc
            break
    assert len(finished) == 3 and all(len(batch) == len(PROMPTS) for batch in finished)
    assert error is not None
    message = str(error)
    assert url in message and "3 attempts" in message and "ConnectError" in message
    assert error.partial == [None] * len(PROMPTS)


if __name__ == "__main__":  # the worker: python tests/test_vllm.py OUT.json MODEL_DIR [adapters]
    out = Path(sys.argv[1])
    if sys.argv[3:] == ["adapters"]:
        checks = run_adapter_checks(sys.argv[2], out.parent)
    else:
        checks = run_engine_checks(sys.argv[2])
    out.write_text(json.dumps(checks))
