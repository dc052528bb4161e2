"""The evaluation harness against an OpenAI-compatible endpoint: vLLM's CPU server, tiny model.

Needs the separate virtualenv built by scripts/setup_vllm_env.sh (.venv-vllm); skipped without it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from councilzoo.evaluation.harness import main

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
STARTUP_S = 300


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tiny_model_dir, tmp_path_factory):
    if not VLLM_PYTHON.exists():
        pytest.skip(".venv-vllm is absent: run scripts/setup_vllm_env.sh to enable the vllm tier")
    port = _free_port()
    env = {
        **os.environ,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_HOST_IP": "127.0.0.1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    log = (tmp_path_factory.mktemp("vllm") / "server.log").open("w")
    cmd = [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--max-model-len",
        "512",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + STARTUP_S
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited with {proc.returncode}; see {log.name}")
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=2)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail(f"vLLM server did not start within {STARTUP_S} s; see {log.name}")
        yield f"{url}/v1", str(tiny_model_dir)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_eval_runs_against_the_vllm_endpoint(vllm_server, tmp_path):
    base_url, model = vllm_server
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
