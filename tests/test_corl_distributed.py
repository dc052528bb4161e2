"""Multi-process Co-RL: two member processes exchange labels by id; one dying stops the other."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from councilzoo.learners.logging import read_metrics

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp_path: Path, models: Path, max_steps: int) -> Path:
    cfg = {
        "members": [
            {"name": "qwen", "tiny_family": "qwen3"},
            {"name": "llama", "tiny_family": "llama", "view": 1},
        ],
        "reward_rule": "ring",
        "num_generations": 4,
        "prompts_per_step": 4,
        "max_new_tokens": 12,
        "max_steps": max_steps,
        "output_dir": str(tmp_path / "run"),
        "tiny_models_dir": str(models),
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32},
        "policy": {"learning_rate": 1e-3},
        "distributed": {"port": _free_port(), "heartbeat_interval_s": 0.5, "heartbeat_timeout_s": 5.0},
    }
    path = tmp_path / "corl.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _launch(config: Path, member: int) -> subprocess.Popen:
    env = {**os.environ, "COUNCILZOO_MEMBER": str(member), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "councilzoo.cli", "train", "corl", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Build and warm the two tiny models once, so member processes only load them."""
    from councilzoo.config import load_config
    from councilzoo.learners.corl import CoRL, CoRLConfig

    tmp = tmp_path_factory.mktemp("dist")
    path = tmp / "models"
    CoRL(load_config(_config(tmp, path, 1), CoRLConfig))
    return path


def test_two_member_processes_train_three_steps(tmp_path, models):
    config = _config(tmp_path, models, max_steps=3)
    procs = [_launch(config, m) for m in (0, 1)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    for name in ("qwen", "llama"):
        rows = read_metrics(tmp_path / "run" / f"metrics-{name}.jsonl")
        assert [r["step"] for r in rows] == [1, 2, 3]
        assert all(0.0 <= r["agreement"] <= 1.0 for r in rows)
        assert (tmp_path / "run" / f"checkpoints-{name}" / "step-000003" / "state.json").is_file()
    # Both members computed the same cohort-level agreement from the exchanged labels.
    a = read_metrics(tmp_path / "run" / "metrics-qwen.jsonl")
    b = read_metrics(tmp_path / "run" / "metrics-llama.jsonl")
    assert [r["agreement"] for r in a] == [r["agreement"] for r in b]


def test_killing_one_member_stops_the_other(tmp_path, models):
    config = _config(tmp_path, models, max_steps=500)
    procs = [_launch(config, m) for m in (0, 1)]
    metrics = tmp_path / "run" / "metrics-llama.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.is_file() and read_metrics(metrics)) and time.monotonic() < deadline:
        time.sleep(0.5)
    procs[1].send_signal(signal.SIGKILL)
    _, err = procs[0].communicate(timeout=120)
    assert procs[0].returncode == 3, err[-2000:]
    assert "cohort stopped: member 1 sent no heartbeat" in err
