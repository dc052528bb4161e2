"""TRACER on a world of several processes (the cluster tier: a torchrun world of 2 gloo CPU
processes): rank 0 plays each step and samples the round, every rank trains its share, and the
run trains as one process with the whole round as its micro-batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from councilzoo.learners.logging import read_metrics

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(folder: Path, model_dir: Path) -> Path:
    # 3 turns x G = 2: 6 candidates, 3 a rank, so the second turn's group spans both ranks; one
    # update a step (minibatches: 1): with several, a world's minibatches hold other candidates
    # than one process's (TRL splits each rank's share), so only their number is the same
    cfg = {
        "seed": 3, "max_steps": 2, "output_dir": str(folder / "run"), "problems_per_step": 2, "save_steps": 2,
        "env": {"lam": 0.01, "rounds": 3}, "baselines": ["never_review"],
        "agents": {"kind": "llm", "model": str(model_dir), "max_new_tokens": 12, "stop": ["e", "a"]},
        "generation": {"enabled": True, "num_candidates": 2, "cost_penalty": 1.0, "turns_per_step": 3,
                       "minibatches": 1, "trainer": {"learning_rate": 1e-2},
                       "peft": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"synthetic_size": 6, "eval_limit": 2},
    }  # fmt: skip
    path = folder / "tracer.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(config: Path, processes: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    launcher = [sys.executable, "-m", "councilzoo.cli"]
    if processes > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
                    "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), "-m", "councilzoo.cli"]
    return subprocess.run([*launcher, "train", "tracer", str(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)  # fmt: skip


def test_a_two_process_tracer_world_trains_like_one_process(tmp_path, tiny_model_dir):
    runs = {}
    for processes in (1, 2):
        folder = tmp_path / f"world{processes}"
        folder.mkdir()
        out = _run(_config(folder, tiny_model_dir), processes)
        assert out.returncode == 0, out.stderr[-4000:]
        runs[processes] = folder / "run"
    one, two = runs[1], runs[2]
    rows = {p: read_metrics(runs[p] / "metrics.jsonl") for p in (1, 2)}
    assert [r["step"] for r in rows[2]] == [1, 2]  # one row a step, written by rank 0 alone
    for a, b in zip(rows[1], rows[2], strict=True):
        # the same episodes, controllers and candidates' rewards: the round is played once
        assert b["train/accuracy"] == a["train/accuracy"] and b["decisions"] == a["decisions"]
        assert b["gspo/reward"] == pytest.approx(a["gspo/reward"], abs=1e-6)
    alone = load_file(one / "final" / "adapter_model.safetensors")
    data_parallel = load_file(two / "final" / "adapter_model.safetensors")
    assert set(alone) == set(data_parallel)
    lora_b = [k for k in alone if "lora_B" in k]  # zero at the start: what the two steps wrote
    assert lora_b and max(alone[k].abs().max().item() for k in lora_b) > 1e-4
    for k in alone:
        torch.testing.assert_close(data_parallel[k], alone[k], rtol=1e-4, atol=1e-5, msg=k)
    summary = {p: json.loads((runs[p] / "summary.json").read_text()) for p in (1, 2)}
    assert summary[2]["regret"] == summary[1]["regret"]  # the controllers learned on rank 0 as alone
