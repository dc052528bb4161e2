"""The vllm tier, server mode: the generation paths councilzoo owns inside training, on a vLLM server.

With ``trainer: {use_vllm: true, vllm_mode: server}`` a cohort member's held-out evaluation and
seeded sampling, and TRACER's utterance rollouts, generate on the server through TRL's own
``VLLMClient`` (``councilzoo.learners.live_policy.ServerGenerator``), after a weight push through
TRL's ``sync_weights``. One real vLLM CPU server (the session's ``trl_vllm_server``, on the tiny
model) serves both trainings, which run in one .venv-vllm worker (this file:
``.venv-vllm/bin/python tests/test_vllm_server_mode.py URL MODEL_DIR OUT.json``; TRL's client needs
vllm installed).

What only a GPU covers: TRL pushes weights to a server over NCCL (``init_communicator``), which
needs CUDA, so on a CPU a server-mode trainer stops at its first push. The worker swaps in the
file-based push of tests/test_trl_vllm.py (workaround 3 there: the same tensors, handed over as a
safetensors file through the dev-mode ``/collective_rpc``); everything else is the real path. The
NCCL push itself runs in ``scripts/gpu_check.sh``'s ``server`` phase (2 GPUs: one for the server,
one for the member). The worker took 114 s at load 16 on 2 cores (18 s of CPU time);
the tiny member's warm-up adds ~20 s to the session, and the server boots while
tests/test_trl_vllm.py's colocate run trains.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import vllm_server
from test_trl_vllm import _has_trl
from test_vllm_training import check_evals_saw_each_steps_weights, record_samples_and_eval_texts
from vllm_server import VLLM_PYTHON

STEPS = 2
G = 4
HELD_OUT = {"dataset": "synthetic:multiple_choice", "split": "test", "num_problems": 8, "eval_steps": 1}


def server_trainer(url: str) -> dict:
    return {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": url, "vllm_server_timeout": 60,
            "learning_rate": 1e-2}  # fmt: skip


def cohort_config(root: Path, model: str, url: str):
    from councilzoo.learners.baselines import BaselineConfig
    from councilzoo.learners.corl.config import EvalConfig, MemberConfig
    from councilzoo.learners.data import DataConfig

    return BaselineConfig(
        members=[MemberConfig(name="m", model=model)], reward_rule="ground_truth", num_generations=G,
        prompts_per_step=3, max_steps=STEPS, max_completion_length=12, save_steps=1,
        output_dir=str(root / "run"), seeded_sampling=True,
        data=DataConfig(dataset="synthetic:multiple_choice", num_problems=12),
        eval=EvalConfig(**HELD_OUT), trainer=server_trainer(url),
    )  # fmt: skip


def tracer_config(root: Path, model: str, url: str):
    from councilzoo.config import load_config
    from councilzoo.learners.tracer.config import TracerConfig

    return load_config({
        "max_steps": STEPS, "problems_per_step": 2, "output_dir": str(root / "tracer"), "save_steps": 0,
        "env": {"rounds": 2, "lam": 0.01}, "baselines": ["never_review"],
        "agents": {"kind": "llm", "model": model, "max_new_tokens": 12},
        "generation": {"enabled": True, "num_candidates": G, "turns_per_step": 2, "cost_penalty": 0.5,
                       "minibatches": 1,  # one update a step: global_step counts steps
                       "trainer": server_trainer(url),
                       "peft": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"synthetic_size": 8, "eval_limit": 2},
    }, TracerConfig)  # fmt: skip


# --- the worker (runs inside .venv-vllm) ---------------------------------------------------


def _replay_seeded_calls() -> list[bool]:
    """After each seeded ``ServerGenerator.generate`` call, ask again with the prompts in reverse
    order: each prompt's samples must depend on its own seed alone (one per-prompt verdict)."""
    from councilzoo.learners.live_policy import ServerGenerator

    same: list[bool] = []
    generate = ServerGenerator.generate

    def replayed(self, prompts, n=1, sampling=None, seeds=None):
        out = generate(self, prompts, n, sampling, seeds)
        if seeds is not None:
            again = generate(self, prompts[::-1], n, sampling, list(seeds)[::-1])[::-1]
            same.extend(
                [c.token_ids for c in a] == [c.token_ids for c in b] for a, b in zip(out, again, strict=True)
            )
        return out

    ServerGenerator.generate = replayed
    return same


def run_cohort(root: Path, model: str, url: str) -> dict:
    """One seeded member trained 2 steps on the server: its samples and held-out texts."""
    from councilzoo.learners.baselines import GRPO
    from councilzoo.learners.corl.member import run_member
    from councilzoo.learners.logging import read_metrics

    cfg = cohort_config(root, model, url)
    samples, texts = record_samples_and_eval_texts()
    run_member(cfg, 0, GRPO.reward_functions)
    return {"samples": samples, "eval_texts": texts, "evals": read_metrics(cfg.member_dir(0) / "eval.jsonl")}


def run_tracer(root: Path, model: str, url: str) -> dict:
    """TRACER 2 steps with LoRA, its episodes and candidates generated on the server."""
    from councilzoo.learners.tracer.learner import Tracer

    tracer = Tracer(tracer_config(root, model, url))
    history = tracer.train()
    evaluation = tracer.evaluate(tracer.eval_sets["synthetic:numeric"])
    model = tracer.generation.trainer.model
    return {
        "generator": type(tracer.generation.generator).__name__,
        "global_step": tracer.generation.trainer.state.global_step,
        "steps": [h["step"] for h in history],
        "lora_b_max": max(p.abs().max().item() for n, p in model.named_parameters() if "lora_B" in n),
        "eval_accuracy": evaluation["accuracy"],
    }


# --- tests (main environment) --------------------------------------------------------------

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not _has_trl(VLLM_PYTHON), reason=vllm_server.SKIP_REASON),
]


@pytest.fixture(scope="module")
def server_runs(trl_vllm_server, tiny_member_dir, tmp_path_factory) -> tuple[Path, str, dict]:
    root = tmp_path_factory.mktemp("vllm_server_mode")
    out = root / "result.json"
    env = {**vllm_server.cpu_env(), "OMP_NUM_THREADS": "2"}
    cmd = [str(VLLM_PYTHON), __file__, trl_vllm_server, str(tiny_member_dir), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"vLLM server-mode worker failed:\n{proc.stderr[-4000:]}"
    return root, trl_vllm_server, json.loads(out.read_text())


def test_seeded_sampling_through_the_server_is_seeded_per_item(server_runs):
    _, _, result = server_runs
    samples = result["cohort"]["samples"]
    assert len(samples) == STEPS
    for step in samples:
        groups = [tuple(map(tuple, step["completion_ids"][i : i + G])) for i in range(0, 3 * G, G)]
        assert all(len(set(g)) > 1 for g in groups)  # each item's G samples differ
        assert [len(lp) for lp in step["logprobs"]] == [len(ids) for ids in step["completion_ids"]]
    assert samples[0]["completion_ids"] != samples[1]["completion_ids"]  # another step, other seeds
    # every seeded prompt drew the same samples when asked again in another order
    assert result["replays"] and all(result["replays"])


def test_held_out_accuracy_through_the_server_sees_each_steps_weights(server_runs, tiny_member_dir):
    """Each evaluation saw the weights of its step: the server's greedy texts equal transformers'
    greedy texts on the checkpoint of that step. Ours pushed once per evaluation, and TRL's rounds
    then found the server current (one push each, not two)."""
    root, url, result = server_runs
    run, cfg = result["cohort"], cohort_config(root, str(tiny_member_dir), url)
    assert [(e["step"], e["items"]) for e in run["evals"]] == [(0, 8), (1, 8), (2, 8)]
    assert result["cohort_pushes"] == len(run["evals"])
    weights = [tiny_member_dir] + [root / "run" / "members" / "m" / f"checkpoint-{k}" for k in (1, 2)]
    check_evals_saw_each_steps_weights(run, cfg, weights, root)


def test_tracer_rollouts_through_the_server(server_runs):
    _, _, result = server_runs
    tracer = result["tracer"]
    assert tracer["generator"] == "ServerGenerator"
    assert tracer["global_step"] == STEPS and tracer["steps"] == [1, 2]
    assert tracer["lora_b_max"] > 0  # the adapters trained (they start at zero)
    assert result["tracer_pushes"] == STEPS + 1  # TRL's before each rollout, ours before the evaluation
    assert 0.0 <= tracer["eval_accuracy"] <= 1.0


if __name__ == "__main__":  # the worker: python tests/test_vllm_server_mode.py URL MODEL_DIR OUT.json
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_trl_vllm import _patch_server

    server_url, model_dir, out_path = sys.argv[1:]
    work = Path(out_path).parent
    (work / "sync").mkdir()
    pushes = _patch_server(str(work / "sync"))
    replays = _replay_seeded_calls()
    cohort = run_cohort(work, model_dir, server_url)
    cohort_pushes = len(pushes)
    tracer = run_tracer(work, model_dir, server_url)
    result = {"cohort": cohort, "cohort_pushes": cohort_pushes, "replays": replays, "tracer": tracer,
              "tracer_pushes": len(pushes) - cohort_pushes}  # fmt: skip
    Path(out_path).write_text(json.dumps(result))
