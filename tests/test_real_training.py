"""The real tier: Co-RL trains SmolLM2-135M-Instruct beside Gemma-3-270M (LoRA) from the shipped
config, each rewarded by the other's labels, in separate member worlds. (The same-family cohort runs
the same code with another model name; one real run is what the tier can afford.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from councilzoo.config import load_config
from councilzoo.learners.corl import CoRL, CoRLConfig
from councilzoo.learners.corl.member import member_model_path
from councilzoo.learners.data import load_items
from councilzoo.learners.logging import read_metrics
from councilzoo.repro import cross_family
from councilzoo.tasks import answers_equivalent

pytestmark = [pytest.mark.real, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_two_family_cohort_trains_together_changing_only_each_members_lora_weights(
    smollm2_dir, gemma_dir, tmp_path
):
    """SmolLM2 (chat template, 49k vocabulary) beside Gemma-3-270M (base, completion text, 262k
    vocabulary) in one cohort, each rewarded by the other's labels: both adapters move, nothing else
    is saved, and each member's held-out evaluation before training grades what its model answers
    greedily in its own prompt style, cut at its stop strings (as the cross-family calibration
    measures it: on these 8 items Gemma's eighth reply, uncut, goes on to a next question whose
    numbers were read)."""
    raw = yaml.safe_load((ROOT / "configs" / "corl_smollm2_gemma_cpu.yaml").read_text())
    raw.update(max_steps=1, prompts_per_step=2, num_generations=4, max_completion_length=24,
               output_dir=str(tmp_path / "run"))
    raw["distributed"]["port"] = _free_port()
    raw["data"]["num_problems"] = 8
    raw["eval"].update(num_problems=8, eval_steps=1)
    cfg = load_config(raw, CoRLConfig)
    CoRL(cfg).train()

    for index, member in enumerate(cfg.members):
        folder = cfg.member_dir(index)
        adapter = load_file(folder / "final" / "adapter_model.safetensors")
        assert adapter and all("lora_" in name for name in adapter)
        moved = [name for name, w in adapter.items() if "lora_B" in name and torch.count_nonzero(w) > 0]
        assert moved, f"{member.name}: no LoRA weight moved in its step"
        rows = [r for r in read_metrics(folder / "metrics.jsonl") if "reward" in r]
        assert [r["step"] for r in rows] == [1]
        evals = read_metrics(folder / "eval.jsonl")  # held-out greedy accuracy before and after
        assert [e["step"] for e in evals] == [0, 1] and all(len(e["hits"]) == 8 for e in evals)
        items = load_items(cfg.eval, cfg.seed)
        folder = member_model_path(cfg, index)
        greedy = cross_family._answers(member.model, folder, items, 0, 1, 0.0, cfg.max_completion_length)
        graded = [int(answers_equivalent(a, p.answer, p.kind)) for [a], p in zip(greedy, items, strict=True)]
        assert evals[0]["hits"] == graded, member.name
