"""TRACER with the offline tiny LLM: a full step (controllers + GSPO for both roles) on CPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from councilzoo.config import load_config
from councilzoo.learners.tracer import Tracer
from councilzoo.learners.tracer_config import TracerConfig


def tiny_config(model_dir, out_dir, **overrides) -> TracerConfig:
    data = {
        "steps": 2, "problems_per_step": 2, "out_dir": str(out_dir), "env": {"lam": 0.01, "rounds": 3},
        # Stop strings make candidate lengths differ, so the cost penalty gives GSPO a signal even
        # though a random model never states a right answer or a verdict.
        "agents": {"kind": "llm", "model": str(model_dir), "max_new_tokens": 12, "stop": ["e", "a"]},
        "generation": {"enabled": True, "num_candidates": 3, "cost_penalty": 1.0,
                       "policy": {"learning_rate": 1e-2, "lora": {"r": 4, "alpha": 8}}},
        "data": {"synthetic_size": 6, "eval_limit": 2}, **overrides,
    }
    return load_config(data, TracerConfig)


@pytest.mark.slow
@pytest.mark.parametrize("share_model", [True, False])
def test_full_tracer_step_trains_both_roles_and_resumes_exactly(tiny_model_dir, tmp_path, share_model):
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", agents={
        "kind": "llm", "model": str(tiny_model_dir), "max_new_tokens": 12, "stop": ["e", "a"],
        "share_model": share_model})
    tracer = Tracer(cfg)
    models = tracer.generation.models()
    trainable = lambda m: {k: v for k, v in m.named_parameters() if v.requires_grad}  # noqa: E731
    before = {name: {k: v.clone() for k, v in trainable(m).items()} for name, m in models.items()}
    history = tracer.train()
    assert set(models) == ({"shared"} if share_model else {"proposer", "reviewer"})
    for name, model in models.items():
        changed = [not torch.equal(before[name][k], v) for k, v in trainable(model).items()]
        assert any(changed), f"GSPO left model {name!r} unchanged"
    groups = sum(s["groups"] for m in history for s in m["generation"].values())
    assert groups >= 4 and all(m["states_over_bound"] == [] for m in history)
    # Resume: regrets, strategy sums and adapters come back exactly.
    ckpt = tmp_path / "run" / "checkpoints" / "step-000002"
    again = Tracer(cfg)
    again.load(ckpt)
    for key, value in tracer.controller.state_dict().items():
        np.testing.assert_array_equal(again.controller.state_dict()[key], value)
    for name, model in again.generation.models().items():
        for (k, v), (_, w) in zip(model.state_dict().items(), models[name].state_dict().items(), strict=True):
            assert torch.equal(v, w), k


@pytest.mark.slow
def test_cli_entry_writes_metrics_checkpoints_and_summary(tiny_model_dir, tmp_path):
    import argparse

    from councilzoo.config import dump_config
    from councilzoo.learners.tracer import main

    cfg = tiny_config(tiny_model_dir, tmp_path / "run", steps=1, baselines=["never_review"])
    path = dump_config(cfg, tmp_path / "tracer.yaml")
    assert main(path, argparse.Namespace(out=None, max_steps=None, resume=False)) == 0
    out = tmp_path / "run"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and "generation/shared/loss" in rows[0]
    assert any(k.startswith("regret/") and k.endswith("/avg_bound") for k in rows[0])
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["eval"]["synthetic:numeric"]) == {"tracer", "never_review"}
    assert (out / "checkpoints" / "step-000001" / "shared").is_dir()


@pytest.mark.slow
def test_a_resumed_llm_run_plays_and_trains_as_the_uninterrupted_one(tiny_model_dir, tmp_path):
    # Weights, optimizer states, regrets and the engine's sampling-seed counter come back, so the
    # step after a resume draws the same utterances and makes the same update.
    agents = {"kind": "llm", "model": str(tiny_model_dir), "max_new_tokens": 12, "stop": ["e", "a"]}
    straight = Tracer(tiny_config(tiny_model_dir, tmp_path / "a", agents=agents, checkpoint_every=1))
    history = straight.train()
    resumed = Tracer(tiny_config(tiny_model_dir, tmp_path / "b", agents=agents, checkpoint_every=1))
    resumed.load(tmp_path / "a" / "checkpoints" / "step-000001")
    again = resumed.step()
    assert again["train"] == history[1]["train"]
    assert again["generation"] == history[1]["generation"]
