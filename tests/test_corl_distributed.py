"""Whole cohorts started by the one launch command: member worlds in their own processes, labels
exchanged by (round, problem key), exact resume, and a failing or hung member stopping all."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from councilzoo.learners.logging import read_metrics

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp_path: Path, models: Path, max_steps: int, **extra) -> Path:
    cfg = {
        "members": [
            {"name": "qwen", "tiny_family": "qwen3"},
            {"name": "llama", "tiny_family": "llama", "view": 1},
        ],
        "reward_rule": "ring",
        "num_generations": 4,
        "prompts_per_step": 4,
        "max_completion_length": 12,
        "max_steps": max_steps,
        "output_dir": str(tmp_path / "run"),
        "tiny_models_dir": str(models),
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32},
        "trainer": {"learning_rate": 1e-3},
        "distributed": {"port": _free_port(), "heartbeat_interval_s": 0.5, "heartbeat_timeout_s": 5.0},
        **extra,
    }
    path = tmp_path / "corl.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _train(
    config: Path, *flags: str, learner: str = "corl", timeout: float = 600
) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "councilzoo.cli", "train", learner, str(config), *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """The two tiny models, built and warmed once (the launcher reuses them)."""
    from councilzoo.config import load_config
    from councilzoo.learners.corl import CoRLConfig
    from councilzoo.learners.data import load_items
    from councilzoo.tiny_members import build_tiny_models

    tmp = tmp_path_factory.mktemp("dist")
    cfg = load_config(yaml.safe_load(_config(tmp, tmp / "models", 1).read_text()), CoRLConfig)
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    return tmp / "models"


def _weights(run: Path, name: str) -> dict[str, torch.Tensor]:
    return load_file(run / "members" / name / "final" / "model.safetensors")


def test_cohort_trains_and_resumes_to_the_same_weights(tmp_path, models):
    config = _config(tmp_path, models, max_steps=4, save_steps=2)
    done = _train(config)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "run"
    for name in ("qwen", "llama"):
        rows = [r for r in read_metrics(run / "members" / name / "metrics.jsonl") if "reward" in r]
        assert [r["step"] for r in rows] == [1, 2, 3, 4]
        assert all(0.0 <= r["agreement"] <= 1.0 for r in rows)
    # Both members computed the cohort's agreement from the same exchanged labels.
    agreement = [
        [r["agreement"] for r in read_metrics(run / "members" / n / "metrics.jsonl") if "reward" in r]
        for n in ("qwen", "llama")
    ]
    assert agreement[0] == agreement[1]
    straight = {n: _weights(run, n) for n in ("qwen", "llama")}
    assert "qwen" in done.stdout and "reward" in done.stdout  # the final table

    # As if killed after the step-2 checkpoints: later checkpoints and final weights are gone.
    for name in ("qwen", "llama"):
        shutil.rmtree(run / "members" / name / "checkpoint-4")
        shutil.rmtree(run / "members" / name / "final")
    refused = _train(config)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = _train(config, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for name in ("qwen", "llama"):
        again = _weights(run, name)
        assert all(torch.equal(again[k], straight[name][k]) for k in again), name
        steps = [r["step"] for r in read_metrics(run / "members" / name / "metrics.jsonl") if "reward" in r]
        assert steps == [1, 2, 3, 4]  # no duplicated rows after the resume


def test_warm_started_worlds_make_the_same_updates(tmp_path, models):
    """Worlds forked from the warm-start server run the same member main as fresh processes:
    the same logged rewards and agreement, and bit-identical final weights."""
    runs = {}
    for warm in (False, True):
        root = tmp_path / f"warm{int(warm)}"
        root.mkdir()
        out = _train(_config(root, models, max_steps=2, warm_start=warm))
        assert out.returncode == 0, out.stderr[-3000:]
        runs[warm] = root / "run"
    for name in ("qwen", "llama"):
        rows = [
            [(r["step"], r["reward"], r["agreement"])
             for r in read_metrics(runs[warm] / "members" / name / "metrics.jsonl") if "reward" in r]
            for warm in (False, True)
        ]
        assert rows[0] == rows[1] and len(rows[0]) == 2, name
        fresh, forked = _weights(runs[False], name), _weights(runs[True], name)
        assert all(torch.equal(fresh[k], forked[k]) for k in fresh), name


def test_a_batch_log_has_a_plain_line_per_step_and_held_out_accuracy_reaches_tensorboard(tmp_path, models):
    """stdout a pipe (a batch job's log): a line per phase and per step, no escape codes; the
    held-out accuracy is a metric like the others, in metrics.jsonl and the TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    held_out = {"dataset": "synthetic:multiple_choice", "num_problems": 4, "eval_steps": 1}
    config = _config(tmp_path, models, max_steps=2, report_to=["tensorboard"], eval=held_out)
    done = _train(config)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\x1b" not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("councilzoo: starting 2 member world(s): qwen, llama") for line in lines)
    steps = [line for line in lines if line.startswith("llama step ")]
    assert [s.split()[2] for s in steps] == ["0/2", "1/2", "2/2"]  # step 0: accuracy before training
    assert all("reward=" in s and "label_accuracy=" in s for s in steps[1:])
    assert all("eval_accuracy=" in s for s in steps)
    rows = read_metrics(tmp_path / "run" / "members" / "llama" / "metrics.jsonl")
    assert [r["step"] for r in rows if "eval_accuracy" in r] == [0, 1, 2]
    tags = set()
    for path in (tmp_path / "run" / "members" / "llama").rglob("events.out.tfevents*"):
        tags |= set(EventAccumulator(str(path)).Reload().Tags()["scalars"])
    assert "eval/accuracy" in tags


def test_a_failing_member_stops_the_cohort(tmp_path, models):
    """(A world forked by warm start ends through the same launcher code.)"""
    config = _config(tmp_path, models, max_steps=50)
    out = _train(config, learner="cohort_faults:CrashingCoRL")
    assert out.returncode == 3, out.stderr[-3000:]
    assert "member 'llama' exited with status 1" in out.stderr
    assert "deliberate failure in round 1" in out.stderr  # the world's own traceback reaches the user


def test_a_hung_member_stops_the_cohort_within_its_timeout(tmp_path, models):
    config = _config(
        tmp_path,
        models,
        max_steps=50,
        distributed={
            "port": _free_port(),
            "heartbeat_interval_s": 0.5,
            "heartbeat_timeout_s": 5.0,
            "step_timeout_s": 10.0,
        },
    )
    out = _train(config, learner="cohort_faults:HangingCoRL", timeout=300)
    assert out.returncode == 3, out.stderr[-3000:]
    assert "did not answer within 10.0 s" in out.stderr


def test_a_member_can_be_a_two_process_data_parallel_world(tmp_path, models):
    """Each member is a torchrun world of 2 (gloo on CPU): its reward gathers each item's G
    completions from both ranks before voting, only rank 0 talks to the cohort, and with seeded
    sampling the cohort makes the same updates as with one process per member. Three items of
    G = 4 on 2 ranks put the second item's copies on both ranks. Held-out evaluation runs on both
    ranks (5 items: shards of 3 and 2, the short one padded) and gathers the same accuracy."""
    runs = {}
    held_out = {"dataset": "synthetic:multiple_choice", "split": "test", "num_problems": 5, "eval_steps": 1}
    for processes in (1, 2):
        root = tmp_path / f"world{processes}"
        root.mkdir()
        config = _config(root, models, max_steps=2, seeded_sampling=True, prompts_per_step=3, eval=held_out)
        data = yaml.safe_load(config.read_text())
        for member in data["members"]:
            member["num_processes"] = processes
        config.write_text(yaml.safe_dump(data))
        out = _train(config)
        # the whole stderr: a rank's native abort (seen once) prints its stack above a long module list
        assert out.returncode == 0, out.stderr
        runs[processes] = root / "run"
    run = runs[2]
    rows = {n: [r for r in read_metrics(run / "members" / n / "metrics.jsonl") if "reward" in r]
            for n in ("qwen", "llama")}
    assert [r["step"] for r in rows["qwen"]] == [1, 2]
    assert all(r["votes_per_item"] == 4 for n in rows for r in rows[n])  # both ranks' completions, G = 4
    # Agreement is computed from the exchanged own labels: the same numbers on both sides means the
    # 2-rank members voted over all of each item's completions.
    assert [r["agreement"] for r in rows["qwen"]] == [r["agreement"] for r in rows["llama"]]
    one = {n: [r for r in read_metrics(runs[1] / "members" / n / "metrics.jsonl") if "reward" in r]
           for n in ("qwen", "llama")}
    for name in ("qwen", "llama"):
        assert [r["reward"] for r in rows[name]] == pytest.approx([r["reward"] for r in one[name]], abs=1e-6)
        evals = {p: read_metrics(runs[p] / "members" / name / "eval.jsonl") for p in (1, 2)}
        assert [(e["step"], e["items"]) for e in evals[2]] == [(0, 5), (1, 5), (2, 5)]  # both shards
        assert evals[2] == evals[1]
        start = load_file(next((models).glob(f"{name}*/model.safetensors")))
        alone, data_parallel = _weights(runs[1], name), _weights(run, name)
        moved = max((alone[k] - start[k]).abs().max().item() for k in alone)
        assert moved > 1e-4, name  # the update is not empty
        for k in alone:
            torch.testing.assert_close(data_parallel[k], alone[k], rtol=1e-4, atol=1e-5, msg=f"{name} {k}")
