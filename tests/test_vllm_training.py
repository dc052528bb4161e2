"""The vllm tier: the generation paths councilzoo owns inside training, on TRL's colocated vLLM engine.

With ``trainer: {use_vllm: true}`` a cohort member's held-out evaluation and seeded sampling, and
TRACER's utterance rollouts, generate on the engine TRL colocates, after a weight push
(``councilzoo.learners.live_policy``). Each training runs in .venv-vllm's python (this file is the
worker: ``.venv-vllm/bin/python tests/test_vllm_training.py cohort|tracer OUT.json ROOT``), under the
CPU workarounds for TRL's own engine that ``test_trl_vllm.py`` documents (engine settings and TRL's
weight push; ours goes through vLLM's ``reload_weights`` and needs none). The checks run here, in the
main environment, against transformers. About 3 minutes on 2 busy cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import vllm_server
from test_trl_vllm import _has_trl
from vllm_server import VLLM_PYTHON

STEPS = 2
HELD_OUT = {"dataset": "synthetic:multiple_choice", "split": "test", "num_problems": 12, "eval_steps": 1}
VLLM_TRAINER = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 512,
                "vllm_gpu_memory_utilization": 0.1, "learning_rate": 1e-2}


def cohort_config(root: Path):
    from councilzoo.learners.baselines import BaselineConfig
    from councilzoo.learners.corl.config import EvalConfig, MemberConfig
    from councilzoo.learners.data import DataConfig

    return BaselineConfig(
        members=[MemberConfig(name="m", tiny_family="qwen3", tiny_warmup_steps=30)],
        reward_rule="ground_truth", num_generations=4, prompts_per_step=3, max_steps=STEPS,
        max_completion_length=12, save_steps=1, output_dir=str(root / "run"),
        tiny_models_dir=str(root / "models"), seeded_sampling=True,
        data=DataConfig(dataset="synthetic:multiple_choice", num_problems=24),
        eval=EvalConfig(**HELD_OUT), trainer=dict(VLLM_TRAINER),
    )  # fmt: skip


def tracer_config(root: Path, model: str):
    from councilzoo.config import load_config
    from councilzoo.learners.tracer.config import TracerConfig

    return load_config({
        "max_steps": STEPS, "problems_per_step": 3, "output_dir": str(root / "tracer"), "save_steps": 0,
        "env": {"rounds": 3, "lam": 0.01}, "baselines": ["never_review"],
        "agents": {"kind": "llm", "model": model, "max_new_tokens": 12},
        "generation": {"enabled": True, "num_candidates": 4, "turns_per_step": 3, "cost_penalty": 0.5,
                       "minibatches": 1,  # one update a step: global_step counts steps
                       "trainer": dict(VLLM_TRAINER),
                       "peft": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"synthetic_size": 16, "eval_limit": 4},
    }, TracerConfig)  # fmt: skip


# --- the worker (runs inside .venv-vllm) ---------------------------------------------------


def _record_pushes() -> list[int]:
    """Count our weight pushes (the real ``sync_weights`` still runs)."""
    from councilzoo.agents.generators.vllm_backend import VLLMGenerator

    pushes: list[int] = []
    push = VLLMGenerator.sync_weights

    def counted(self, model):
        pushes.append(1)
        return push(self, model)

    VLLMGenerator.sync_weights = counted
    return pushes


def record_samples_and_eval_texts() -> tuple[list[dict], list[list[str]]]:
    """Record each seeded-sampling call's samples and each held-out evaluation's texts (the real
    methods still run); the lists fill as the member trains."""
    from councilzoo.learners.corl.member import HeldOutAccuracy
    from councilzoo.learners.corl.seeded_sampling import SeededSampling

    samples, texts = [], []
    sample, hits = SeededSampling.__call__, HeldOutAccuracy._hits

    def recorded_sample(self, prompts, trainer):
        out = sample(self, prompts, trainer)
        samples.append({"completion_ids": out["completion_ids"], "logprobs": out["logprobs"]})
        return out

    def recorded_hits(self, indices, replies):
        texts.append([r.text for r in replies])
        return hits(self, indices, replies)

    SeededSampling.__call__, HeldOutAccuracy._hits = recorded_sample, recorded_hits
    return samples, texts


def check_evals_saw_each_steps_weights(run: dict, cfg, weights: list[Path], root: Path) -> None:
    """The recorded held-out texts of each evaluation equal transformers' greedy texts on that
    step's weights (``weights[k]`` for evaluation k), and so do the accuracies; training moved them."""
    from councilzoo.agents.base import Sampling
    from councilzoo.agents.generators import TransformersGenerator
    from councilzoo.agents.prompts import member_prompt
    from councilzoo.learners.corl.member import HeldOutAccuracy
    from councilzoo.learners.data import load_items

    problems = load_items(cfg.eval, cfg.seed)
    prompts = [member_prompt(p, 0, False) for p in problems]
    greedy = Sampling(max_new_tokens=cfg.max_completion_length, temperature=0.0)
    replies = []
    for folder in weights:
        generator = TransformersGenerator(str(folder), dtype="float32")
        replies.append([g[0] for g in generator.generate(prompts, sampling=greedy)])
    expected = [[r.text for r in step] for step in replies]
    assert run["eval_texts"] == expected
    assert expected[0] != expected[-1]  # training moved the greedy answers: stale weights would show
    grade = HeldOutAccuracy(root / "unused.jsonl", problems, 1, cfg.max_completion_length)._hits
    accuracy = [sum(grade(list(range(len(problems))), step)) / len(problems) for step in replies]
    assert accuracy == [e["accuracy"] for e in run["evals"]]


def run_cohort(root: Path) -> dict:
    """One seeded member trained 2 steps on vLLM: its samples, and the held-out texts per evaluation."""
    from councilzoo.learners.baselines import GRPO
    from councilzoo.learners.corl.member import run_member
    from councilzoo.learners.data import load_items
    from councilzoo.learners.logging import read_metrics
    from councilzoo.tiny_members import build_tiny_models

    cfg = cohort_config(root)
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    samples, texts = record_samples_and_eval_texts()
    pushes = _record_pushes()
    run_member(cfg, 0, GRPO.reward_functions)
    return {
        "samples": samples,
        "eval_texts": texts,
        "evals": read_metrics(cfg.member_dir(0) / "eval.jsonl"),
        "rewards": [r["reward"] for r in read_metrics(cfg.member_dir(0) / "metrics.jsonl") if "reward" in r],
        "pushes": len(pushes),
        # the tiny model's folder as this (vLLM) environment names it: the cache key holds the
        # torch and transformers versions, which differ from the test process's
        "model": str(cfg.tiny_model_dir(0)),
    }


def run_tracer(root: Path) -> dict:
    """TRACER 2 steps with LoRA, its episodes and candidates on TRL's colocated engine."""
    from councilzoo.learners.data import load_items
    from councilzoo.learners.tracer.learner import Tracer
    from councilzoo.tiny_members import build_tiny_models

    models = cohort_config(root)
    build_tiny_models(models, load_items(models.data, models.seed))
    pushes = _record_pushes()
    tracer = Tracer(tracer_config(root, str(models.tiny_model_dir(0))))
    history = tracer.train()
    evaluation = tracer.evaluate(tracer.eval_sets["synthetic:numeric"])
    model = tracer.generation.trainer.model
    lora_b = [p.abs().max().item() for n, p in model.named_parameters() if "lora_B" in n]
    return {
        "generator": type(tracer.generation.generator).__name__,
        "global_step": tracer.generation.trainer.state.global_step,
        "steps": [h["step"] for h in history],
        "pushes": len(pushes),
        "lora_b_max": max(lora_b),
        "eval_accuracy": evaluation["accuracy"],
    }


# --- tests (main environment) --------------------------------------------------------------

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not _has_trl(VLLM_PYTHON), reason=vllm_server.SKIP_REASON),
]


def _worker(kind: str, root: Path) -> dict:
    out = root / f"{kind}.json"
    env = {**vllm_server.cpu_env(), "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [str(VLLM_PYTHON), __file__, kind, str(out), str(root)], env=env, capture_output=True, text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"vLLM {kind} worker failed:\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def cohort_runs(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The same seeded member trained twice from scratch (the tiny model is built by the first)."""
    root = tmp_path_factory.mktemp("vllm_cohort")
    runs = []
    for i in range(2):
        runs.append(_worker("cohort", root))
        (root / "run").rename(root / f"run{i}")
    return root, runs


def test_seeded_sampling_on_vllm_is_reproducible_across_runs(cohort_runs):
    _, (first, second) = cohort_runs
    assert len(first["samples"]) == STEPS
    assert first["samples"] == second["samples"]  # completions and vLLM log-probabilities alike
    assert first["rewards"] == second["rewards"]
    for step in first["samples"]:
        groups = [tuple(map(tuple, step["completion_ids"][i : i + 4])) for i in range(0, 12, 4)]
        assert all(len(set(g)) > 1 for g in groups)  # each item's G samples differ (seeded per item)
        assert [len(lp) for lp in step["logprobs"]] == [len(ids) for ids in step["completion_ids"]]


def test_held_out_accuracy_on_vllm_equals_transformers_on_the_same_weights(cohort_runs):
    """Each evaluation saw the weights of its step: vLLM's greedy texts equal transformers' greedy
    texts on the checkpoint of that step, so the accuracies are equal too."""
    root, (run, _) = cohort_runs
    cfg = cohort_config(root)
    assert [(e["step"], e["items"]) for e in run["evals"]] == [(0, 12), (1, 12), (2, 12)]
    # one push of ours per evaluation; TRL's rounds then find the engine current and push nothing
    assert run["pushes"] == len(run["evals"]) and run["trl_pushes"] == 0
    weights = [Path(run["model"])] + [root / "run0" / "members" / "m" / f"checkpoint-{k}" for k in (1, 2)]
    check_evals_saw_each_steps_weights(run, cfg, weights, root)


def test_each_round_logs_the_share_of_tokens_importance_sampling_dropped(cohort_runs):
    from councilzoo.learners.logging import read_metrics

    root, _ = cohort_runs
    rows = [r for r in read_metrics(root / "run0" / "members" / "m" / "metrics.jsonl") if "reward" in r]
    assert len(rows) == STEPS
    assert all(0.0 <= r["sampling/importance_sampling_masked_fraction"] <= 1.0 for r in rows)


def test_tracer_trains_with_vllm_rollouts(tmp_path):
    result = _worker("tracer", tmp_path)
    assert result["generator"] == "VLLMGenerator"
    assert result["global_step"] == STEPS and result["steps"] == [1, 2]
    assert result["lora_b_max"] > 0  # the adapters trained (they start at zero)
    assert result["trl_pushes"] == STEPS  # TRL pushed before each step's rollout
    assert result["pushes"] == 1  # and the final evaluation pushed the last update
    assert 0.0 <= result["eval_accuracy"] <= 1.0


if __name__ == "__main__":  # the worker: python tests/test_vllm_training.py cohort|tracer OUT.json ROOT
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_trl_vllm import _patch_colocate

    kind, out_path, work = sys.argv[1:]
    trl_pushes = _patch_colocate()
    result = (run_cohort if kind == "cohort" else run_tracer)(Path(work))
    Path(out_path).write_text(json.dumps({**result, "trl_pushes": len(trl_pushes)}))
