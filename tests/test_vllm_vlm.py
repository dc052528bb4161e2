"""The vLLM tier for images: the tiny Idefics3 VLM through vLLM's engine and its OpenAI-compatible
server, against transformers' ``generate`` on the processor's output.

Like tests/test_vllm.py, this file doubles as the worker that runs inside .venv-vllm
(``.venv-vllm/bin/python tests/test_vllm_vlm.py OUT.json MODEL_DIR IMAGE_DIR``), so the engine
starts once; the server boots meanwhile. About 2 minutes on 2 busy cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import vllm_server
from vllm_server import VLLM_PYTHON

MAX_NEW = 12


def greedy():
    from councilzoo.agents.base import Sampling

    return Sampling(max_new_tokens=MAX_NEW, temperature=0.0)


def image_prompts(image_dir: Path) -> list:
    """Two image prompts (image before and after the text, two image sizes) and a text-only one."""
    a, b = str(image_dir / "a.png"), str(image_dir / "b.png")
    return [
        [
            {
                "role": "user",
                "content": [{"type": "image", "image": a}, {"type": "text", "text": "What is 2 + 3?"}],
            }
        ],
        [
            {"role": "system", "content": "You are a reviewer."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "how many apples"}, {"type": "image", "image": b}],
            },
        ],
        [{"role": "user", "content": "Verdict: RIGHT or WRONG"}],
    ]


def write_images(image_dir: Path) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for name, (height, width) in {"a": (40, 60), "b": (50, 90)}.items():
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(
            image_dir / f"{name}.png"
        )


def run_engine_checks(model_dir: str, image_dir: str) -> list[dict]:
    """Greedy completions of the image prompts by VLLMGenerator (runs inside .venv-vllm)."""
    from councilzoo.agents.generators import VLLMGenerator

    gen = VLLMGenerator(model_dir, dtype="float32")
    return [as_record(c) for [c] in gen.generate(image_prompts(Path(image_dir)), sampling=greedy())]


def as_record(c) -> dict:
    """What the two sides compare of one completion (JSON, so it crosses the environments)."""
    fields = ("token_ids", "logprobs", "text", "prompt_token_ids")
    return {name: getattr(c, name) for name in fields}


def reference(model_dir: Path, prompts: list) -> list[dict]:
    """Greedy completions of ``TransformersGenerator`` on the same prompts (one call)."""
    from councilzoo.agents.generators import TransformersGenerator

    out = TransformersGenerator(model_dir, dtype="float32").generate(prompts, sampling=greedy())
    return [as_record(c) for [c] in out]


# --- tests (main environment) --------------------------------------------------------------

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=vllm_server.SKIP_REASON),
]


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("images")
    write_images(folder)
    return folder


@pytest.fixture(scope="module")
def server_boot(tiny_vlm_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("vllm_vlm_server") / "server.log"
    proc, url = vllm_server.start(tiny_vlm_dir, log)
    yield proc, url, log
    vllm_server.kill(proc)


@pytest.fixture(scope="module")
def engine(tiny_vlm_dir, image_dir, tmp_path_factory, server_boot) -> list[dict]:
    """The worker's results; ``server_boot`` is requested only to overlap the two start-ups."""
    out = tmp_path_factory.mktemp("vllm_vlm") / "engine.json"
    proc = subprocess.run(
        [str(VLLM_PYTHON), __file__, str(out), str(tiny_vlm_dir), str(image_dir)],
        env=vllm_server.cpu_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"vLLM worker failed:\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def expected(tiny_vlm_dir, image_dir) -> list[dict]:
    return reference(tiny_vlm_dir, image_prompts(image_dir))


def test_engine_greedy_on_image_prompts_equals_transformers(engine, expected):
    for v, h in zip(engine, expected, strict=True):
        assert v["prompt_token_ids"] == h["prompt_token_ids"]  # placeholders expanded alike
        assert v["token_ids"] == h["token_ids"]
        assert v["text"] == h["text"]
        assert v["logprobs"] == pytest.approx(h["logprobs"], abs=2e-3)
    image_token_counts = [len(h["prompt_token_ids"]) for h in expected]
    assert image_token_counts[0] != image_token_counts[2]


def test_server_answers_image_prompts(server_boot, image_dir, expected):
    from councilzoo.agents.generators import OpenAIGenerator

    proc, url, log = server_boot
    vllm_server.wait_healthy(proc, url, log)
    client = OpenAIGenerator(
        f"{url}/v1",
        vllm_server.SERVED_NAME,
        extra_body={"return_tokens_as_token_ids": True},
        max_concurrency=3,
    )
    out = client.generate(image_prompts(image_dir), sampling=greedy())
    for [c], h in zip(out, expected, strict=True):
        assert c.token_ids == h["token_ids"]
        assert c.text == h["text"]
        assert c.prompt_tokens == len(h["prompt_token_ids"])
        assert c.logprobs == pytest.approx(h["logprobs"], abs=2e-3)


if __name__ == "__main__":  # the worker: python tests/test_vllm_vlm.py OUT.json MODEL_DIR IMAGE_DIR
    Path(sys.argv[1]).write_text(json.dumps(run_engine_checks(sys.argv[2], sys.argv[3])))
