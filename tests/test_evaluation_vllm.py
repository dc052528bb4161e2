"""The evaluation harness against an OpenAI-compatible endpoint: vLLM's CPU server, tiny model.

Needs the separate virtualenv built by scripts/setup_vllm_env.sh (.venv-vllm); skipped without it.
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


@pytest.fixture(scope="module")
def server_url(tiny_model_dir, tmp_path_factory):
    if not vllm_server.VLLM_PYTHON.exists():
        pytest.skip(vllm_server.SKIP_REASON)
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    proc, url = vllm_server.start(tiny_model_dir, log)
    try:
        vllm_server.wait_healthy(proc, url, log)
        yield f"{url}/v1"
    finally:
        vllm_server.kill(proc)


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
