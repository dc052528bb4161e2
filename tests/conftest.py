"""Shared fixtures: hypothesis profiles and the offline tiny model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None)
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
def quick_repro(tmp_path_factory) -> Path:
    """``councilzoo repro all --quick --jobs 2`` run once (its claims in two processes); the folder
    holding ``corl/``, ``comed/`` and ``tracer/``, each with report.md, report.json and figures."""
    from councilzoo.cli import main as cli_main

    out = tmp_path_factory.mktemp("repro")
    assert cli_main(["repro", "all", "--quick", "--jobs", "2", "--out", str(out)]) == 0
    return out
