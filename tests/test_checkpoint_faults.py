"""Damaged checkpoints on resume: each kind of file of the latest checkpoint truncated, deleted or
altered in turn; the resume warns naming it, continues from the previous good checkpoint and ends
exactly where the uninterrupted run ended, with no metrics row written twice.

One straight run per learner (module-scoped) is copied for every fault, so each case costs one
resumed step."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from safetensors.torch import load_file
from test_corl import make_config
from test_tracer_llm import tiny_config

from councilzoo.learners.baselines import GRPO, BaselineConfig
from councilzoo.learners.checkpoint import DamagedCheckpointWarning, latest_checkpoint, load_checkpoint
from councilzoo.learners.corl.member import run_member
from councilzoo.learners.data import load_items
from councilzoo.learners.tracer.learner import TracerLearner
from councilzoo.tiny_members import build_tiny_models

pytestmark = pytest.mark.slow
STEPS = 3  # save_steps=1 and TRL's save_total_limit=2 leave checkpoint-2 and checkpoint-3


def damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # flip: same size, different bytes (only the sha256 can tell)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


def metric_rows(path: Path) -> list[dict]:
    """The rows of a metrics file without wall-clock fields (they differ between any two runs)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if "time" not in k and "seconds" not in k} for r in rows]


def copy_and_damage(straight: Path, tmp_path: Path, member: str, name: str | None, how: str) -> Path:
    """A copy of the finished run ``straight`` with ``member``'s final model removed and its last
    checkpoint damaged (``name`` None: the whole checkpoint is gone, as if killed before saving)."""
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    shutil.rmtree(run / member / "final")
    last = run / member / f"checkpoint-{STEPS}"
    if name is None:
        shutil.rmtree(last)
    else:
        damage(last / name, how)
    return run


def resumed_from_previous(run: Path, straight: Path, member: str) -> bool:
    """The resume loaded checkpoint STEPS-1 (a fresh start would have written it again)."""
    name = f"{member}/checkpoint-{STEPS - 1}/trainer_state.json"
    return (run / name).stat().st_mtime_ns == (straight / name).stat().st_mtime_ns


def damage_warnings(resume) -> list[str]:
    """What ``resume()`` warned about damaged checkpoints."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        resume()
    return [str(w.message) for w in seen if issubclass(w.category, DamagedCheckpointWarning)]


def check_warned(warned: list[str], name: str | None) -> None:
    if name is None:
        assert warned == []
    else:
        [message] = warned
        assert f"checkpoint-{STEPS} is damaged" in message and name in message, message


# ---- TRACER with the tiny LLM: adapters, TRL's states and the controllers' files -----------------


@pytest.fixture(scope="module")
def tracer_run(tiny_model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tracer") / "run"
    TracerLearner(tiny_config(tiny_model_dir, out, max_steps=STEPS, save_steps=1)).train()
    return out


def _controllers(checkpoint: Path) -> dict:
    return load_checkpoint(latest_checkpoint(checkpoint / "tracer"), restore_rng=False).arrays


TRACER_STEP = f"tracer/step-{STEPS:06d}"


@pytest.mark.parametrize(
    "name, how",
    [
        ("adapter_model.safetensors", "truncate"),
        ("optimizer.pt", "delete"),
        ("scheduler.pt", "flip"),
        ("rng_state.pth", "truncate"),
        ("trainer_state.json", "delete"),
        (f"{TRACER_STEP}/arrays.safetensors", "flip"),
        (f"{TRACER_STEP}/state.json", "truncate"),
        (f"{TRACER_STEP}/rng.pt", "delete"),
        ("manifest.json", "delete"),
        (None, "killed before the save"),
    ],
)
def test_tracer_resumes_from_the_newest_good_checkpoint(tracer_run, tiny_model_dir, tmp_path, name, how):
    run = copy_and_damage(tracer_run, tmp_path, ".", name, how)
    cfg = tiny_config(tiny_model_dir, run, max_steps=STEPS, save_steps=1)
    check_warned(damage_warnings(lambda: TracerLearner(cfg).train(resume=True)), name)
    assert resumed_from_previous(run, tracer_run, ".")
    straight, again = (load_file(r / "final" / "adapter_model.safetensors") for r in (tracer_run, run))
    assert straight.keys() == again.keys() and all((straight[k] == again[k]).all() for k in straight)
    controllers, expected = (_controllers(r / f"checkpoint-{STEPS}") for r in (run, tracer_run))
    assert controllers.keys() == expected.keys()
    assert all((controllers[k] == expected[k]).all() for k in expected)
    assert metric_rows(run / "metrics.jsonl") == metric_rows(tracer_run / "metrics.jsonl")  # no repeats
    summary = [json.loads((r / "summary.json").read_text())["eval"] for r in (tracer_run, run)]
    assert summary[0] == summary[1]


# ---- a cohort member (full fine-tuning): model.safetensors -------------------------------------


def _member_config(out: Path) -> BaselineConfig:
    return make_config(out, n=1, rule="ground_truth", cls=BaselineConfig, max_steps=STEPS, save_steps=1)


@pytest.fixture(scope="module")
def member_run(tmp_path_factory) -> Path:
    cfg = _member_config(tmp_path_factory.mktemp("member") / "run")
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    run_member(cfg, 0, GRPO.reward_functions)
    return Path(cfg.output_dir)


@pytest.mark.parametrize("name, how", [("model.safetensors", "truncate"), ("manifest.json", "delete")])
def test_a_member_resumes_from_the_newest_good_checkpoint(member_run, tmp_path, name, how):
    cfg = _member_config(member_run)
    member = cfg.member_dir(0).relative_to(member_run).as_posix()
    run = copy_and_damage(member_run, tmp_path, member, name, how)
    cfg = _member_config(run)
    check_warned(damage_warnings(lambda: run_member(cfg, 0, GRPO.reward_functions, resume=True)), name)
    assert resumed_from_previous(run, member_run, member)
    straight, again = (load_file(r / member / "final" / "model.safetensors") for r in (member_run, run))
    assert straight.keys() == again.keys() and all((straight[k] == again[k]).all() for k in straight)
    assert metric_rows(run / member / "metrics.jsonl") == metric_rows(member_run / member / "metrics.jsonl")
