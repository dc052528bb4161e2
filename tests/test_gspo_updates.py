"""GSPO against GRPO through TRL's own loss (``GRPOTrainer.compute_loss``) on one prepared batch.

On-policy (the completions' old log-probs are the current ones: one gradient step per generation
round, ``num_iterations: 1``) the importance ratio is 1 at both levels and the two objectives
have the same gradient, so a GSPO config that never goes off-policy trains exactly as GRPO does.
Off-policy (the batch was sampled by the policy one update earlier: ``steps_per_generation >
gradient_accumulation_steps`` or ``num_iterations > 1``) the sequence-level ratio and the
paper's narrow clip range (3e-4 / 4e-4) give another update than token-level ratios clipped at 0.2.
"""

from __future__ import annotations

import pytest
import torch

GSPO = {"importance_sampling_level": "sequence", "loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4}
GRPO = {"importance_sampling_level": "token", "loss_type": "grpo", "epsilon": 0.2}


def _trainer(model_dir, tmp_path, objective: dict):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=6, report_to="none", seed=0, beta=0.0,
                      **objective)
    dataset = Dataset.from_dict({"prompt": ["What is 2 + 3?"] * 4})
    trainer = GRPOTrainer(model=str(model_dir), args=args, train_dataset=dataset,
                          reward_funcs=lambda completions, **kw: [0.0] * len(completions))
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop; one micro-batch here
    return trainer


def _batch(trainer) -> dict[str, torch.Tensor]:
    """Four sampled completions of one prompt, with fixed group-normalised advantages."""
    tok = trainer.processing_class
    torch.manual_seed(0)
    prompt = tok(["What is 2 + 3?"] * 4, return_tensors="pt")
    with torch.no_grad():
        out = trainer.model.generate(**prompt, do_sample=True, max_new_tokens=6, min_new_tokens=6,
                                     pad_token_id=tok.pad_token_id)
    completion = out[:, prompt["input_ids"].shape[1]:]
    return {"prompt_ids": prompt["input_ids"], "prompt_mask": prompt["attention_mask"],
            "completion_ids": completion, "completion_mask": torch.ones_like(completion),
            "advantages": torch.tensor([1.2, -0.4, 0.6, -1.4])}


def _old_logps(trainer, batch, shift: float) -> torch.Tensor:
    """The completions' log-probs under the policy that sampled them: the current weights moved by
    ``shift`` along a fixed random direction (one earlier update), restored afterwards."""
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    saved = [p.detach().clone() for p in params]
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in params:
            p.add_(shift * torch.randn(p.shape, generator=gen))
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask,
                                                                 batch["completion_ids"].shape[1])
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    return logps


def _grad(trainer, batch) -> torch.Tensor:
    """The flattened gradient of TRL's GRPO loss for ``batch`` (``compute_loss``, train mode)."""
    trainer.model.train()
    trainer.model.zero_grad(set_to_none=True)
    trainer.compute_loss(trainer.model, batch).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


@pytest.fixture(scope="module")
def trainers(tiny_model_dir, tmp_path_factory):
    return {name: _trainer(tiny_model_dir, tmp_path_factory.mktemp(name), objective)
            for name, objective in (("gspo", GSPO), ("grpo", GRPO))}


def test_gspo_and_grpo_give_the_same_update_on_policy(trainers):
    batch = _batch(trainers["gspo"])  # both trainers hold the same weights
    grads = {name: _grad(t, batch) for name, t in trainers.items()}  # no old log-probs: on-policy
    assert grads["gspo"].abs().max() > 0
    torch.testing.assert_close(grads["gspo"], grads["grpo"], rtol=1e-5, atol=1e-7)
    # old log-probs equal to the current ones are the same case, computed the other way
    on_policy = {**batch, "old_per_token_logps": _old_logps(trainers["gspo"], batch, shift=0.0)}
    torch.testing.assert_close(_grad(trainers["gspo"], on_policy), grads["grpo"], rtol=1e-5, atol=1e-7)


def test_gspo_and_grpo_differ_off_policy(trainers):
    batch = _batch(trainers["gspo"])
    off = {**batch, "old_per_token_logps": _old_logps(trainers["gspo"], batch, shift=0.02)}
    grads = {name: _grad(t, off) for name, t in trainers.items()}
    assert grads["grpo"].abs().max() > 0
    gap = (grads["gspo"] - grads["grpo"]).norm() / grads["grpo"].norm()
    assert gap > 0.05  # another update, not rounding
    # with the paper's clip range a sequence whose ratio left [1 - 3e-4, 1 + 4e-4] on the side its
    # advantage pushes towards gives no gradient at all: GSPO moves less than GRPO here
    assert grads["gspo"].norm() < grads["grpo"].norm()


CPU_UNSAFE = ("bf16", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_max_model_length",
              "vllm_importance_sampling_correction", "gradient_checkpointing")


@pytest.mark.parametrize("name", ["corl_gpu_qwen_llama.yaml", "corl_gpu_qwen25vl_internvl.yaml",
                                  "tracer_gpu.yaml"])
def test_gpu_configs_run_gspo_off_policy_with_the_papers_clip_range(name, tmp_path):
    """Each GPU recipe's trainer settings, as the engine turns them into a GRPOConfig (here on one
    CPU process, with the micro-batch of all the member's GPUs together): sequence-level ratios,
    the paper's clip range, several updates per generation round."""
    from pathlib import Path

    import yaml

    from councilzoo.learners import engine

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / name).read_text())
    if "members" in cfg:
        trainer, world = cfg["trainer"], cfg["members"][0]["num_processes"]
        prompts, generations = cfg["prompts_per_step"], cfg["num_generations"]
    else:
        gen = cfg["generation"]
        trainer, world, prompts, generations = gen["trainer"], 1, gen["turns_per_step"], gen["num_candidates"]
    overrides = {k: v for k, v in trainer.items() if k not in CPU_UNSAFE}
    overrides["per_device_train_batch_size"] = trainer["per_device_train_batch_size"] * world
    run = engine.RunSettings(tmp_path, max_steps=cfg["max_steps"], seed=0, save_steps=0, report_to=[])
    args = run.grpo_config(engine.Round(prompts, generations, max_completion_length=8), name, overrides)
    assert (args.importance_sampling_level, args.loss_type) == ("sequence", "grpo")
    assert (args.epsilon, args.epsilon_high) == (3e-4, 4e-4)
    assert engine.optimizer_steps_per_round(args) == 4  # the first update on-policy, three off it
