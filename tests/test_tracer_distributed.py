"""TRACER on a world of several processes (the cluster tier: 2 gloo CPU processes), started by
``councilzoo train tracer`` from its placement plan: every rank plays its share of each step and
samples its share of the round, and the controllers learn what one process learns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from councilzoo.learners.logging import read_metrics
from councilzoo.learners.placement import Placement

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[1]


def _config(folder: Path, model_dir: Path, processes: int) -> Path:
    # 4 turns x G = 2 a step, 2 turns' groups a rank; one update a step (minibatches: 1). The tiny
    # random model never states a readable answer, so every episode's value depends on the
    # controllers' modes alone (costs in calls), not on the sampled text, which differs between one
    # process and two (a generate call's batch is another): what is compared below.
    cfg = {
        "seed": 3, "max_steps": 2, "output_dir": str(folder / "run"), "problems_per_step": 3, "save_steps": 2,
        "num_processes": processes, "env": {"lam": 0.01, "rounds": 3}, "baselines": ["never_review"],
        "agents": {"kind": "llm", "model": str(model_dir), "max_new_tokens": 12, "stop": ["e", "a"]},
        "generation": {"enabled": True, "num_candidates": 2, "cost_penalty": 1.0, "turns_per_step": 4,
                       "minibatches": 1, "trainer": {"learning_rate": 1e-2},
                       "peft": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"synthetic_size": 6, "eval_limit": 2},
    }  # fmt: skip
    path = folder / "tracer.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _train(config: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "councilzoo.cli", "train", "tracer", str(config)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)  # fmt: skip


def test_a_two_process_tracer_world_from_its_plan_learns_one_process_controllers(tmp_path, tiny_model_dir):
    runs = {}
    for processes in (1, 2):
        folder = tmp_path / f"world{processes}"
        folder.mkdir()
        out = _train(_config(folder, tiny_model_dir, processes))
        assert out.returncode == 0, out.stderr[-4000:]
        runs[processes] = folder / "run"
    [world] = Placement.read(runs[2] / "plan.json").worlds
    assert (world.processes, world.launcher, world.per_device_train_batch_size) == (2, "torchrun", 4)
    assert world.nodes[0].command[1:4] == ["-m", "torch.distributed.run", "--nnodes"]
    assert world.nodes[0].command[-4:-2] == ["councilzoo.learners.tracer.world", str(runs[2] / "plan.json")]
    rows = {p: read_metrics(runs[p] / "metrics.jsonl") for p in (1, 2)}
    assert [r["step"] for r in rows[2]] == [1, 2]  # one row a step, written by rank 0 alone
    for a, b in zip(rows[1], rows[2], strict=True):
        # rank 0 logs the whole step (both ranks' episodes), and the update trained both ranks' groups
        assert b["decisions"] == a["decisions"] > 0 and b["train/accuracy"] == a["train/accuracy"]
        learned = [k for k in a if k.startswith(("regret/", "speak_rate/", "max_regret"))]
        assert learned and {k: b[k] for k in learned} == {k: a[k] for k in learned}
        assert b["gspo/num_tokens"] > 0 and "gspo/reward" in b
    summary = {p: json.loads((runs[p] / "summary.json").read_text()) for p in (1, 2)}
    assert summary[2]["regret"] == summary[1]["regret"]  # every rank learned one process's controllers
    adapter = load_file(runs[2] / "final" / "adapter_model.safetensors")
    lora_b = [k for k in adapter if "lora_B" in k]  # zero at the start: what the two steps wrote
    assert lora_b and max(adapter[k].abs().max().item() for k in lora_b) > 1e-4
