"""The hand-written GSPO/GRPO step equals TRL 1.16's GRPOTrainer loss and gradients."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.agents.base import Completion
from councilzoo.learners.policy_update import (
    LoraSettings,
    PolicyUpdateConfig,
    PolicyUpdater,
    RolloutBatch,
    completion_logps,
    group_advantages,
    policy_loss,
)

TEMPERATURE = 0.7
B, G, P, T = 8, 4, 6, 10


@pytest.fixture(scope="module")
def trl_trainer(tiny_model_dir):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tiny_model_dir.parent / "trl-out"),
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        per_device_train_batch_size=B,
        num_generations=G,
        max_completion_length=T,
        temperature=TEMPERATURE,
        report_to="none",
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["q"] * B}),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop; we call the loss directly
    trainer.model.train()
    return trainer


@pytest.fixture(scope="module")
def batch(trl_trainer):
    g = torch.Generator().manual_seed(0)
    vocab = trl_trainer.model.config.vocab_size
    completion_mask = torch.ones(B, T, dtype=torch.long)
    completion_mask[0, 7:] = 0
    completion_mask[3, 2:] = 0
    return {
        "prompt_ids": torch.randint(5, vocab, (B, P), generator=g),
        "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": torch.randint(5, vocab, (B, T), generator=g),
        "completion_mask": completion_mask,
        "rewards": torch.tensor([1.0, 0, 0, 1, 0.5, 0, 0, 1]),
        "old_shift": 0.3 * torch.randn(B, T, generator=g),
        "ref_shift": 0.3 * torch.randn(B, T, generator=g),
    }


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    "level, loss_type, off_policy, beta",
    [
        ("sequence", "grpo", False, 0.0),  # GSPO on-policy
        ("sequence", "grpo", True, 0.05),  # GSPO off-policy (clipping active) with KL
        ("token", "grpo", False, 0.0),
        ("token", "grpo", True, 0.05),
        ("sequence", "bnpo", True, 0.0),
        ("token", "bnpo", True, 0.05),
    ],
)
def test_loss_and_gradients_equal_trl(trl_trainer, batch, tiny_model_dir, level, loss_type, off_policy, beta):
    from transformers import AutoModelForCausalLM

    cfg = PolicyUpdateConfig(
        importance_sampling_level=level,
        loss_type=loss_type,
        epsilon=0.2,
        epsilon_high=0.28,
        beta=beta,
        temperature=TEMPERATURE,
    )
    ours = AutoModelForCausalLM.from_pretrained(tiny_model_dir).train()
    ids = [batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
    logps, _ = completion_logps(ours, *ids, temperature=TEMPERATURE)
    old = logps.detach() + batch["old_shift"] if off_policy else logps.detach()
    ref = logps.detach() + batch["ref_shift"]
    advantages = group_advantages(batch["rewards"], G)
    loss, _ = policy_loss(logps, old, advantages, batch["completion_mask"], cfg, ref_logps=ref)
    loss.backward()

    trainer = trl_trainer
    trainer.importance_sampling_level, trainer.loss_type, trainer.beta = level, loss_type, beta
    trainer.epsilon_low, trainer.epsilon_high = 0.2, 0.28
    trainer.model.zero_grad(set_to_none=True)
    inputs = {k: batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")}
    inputs["advantages"] = advantages
    if off_policy:
        inputs["old_per_token_logps"] = old
    if beta:
        inputs["ref_per_token_logps"] = ref
    trl_loss = trainer.compute_loss(trainer.model, inputs)
    trl_loss.backward()

    assert loss.item() == pytest.approx(trl_loss.item(), abs=1e-6)
    ours_grads, trl_grads = _grads(ours), _grads(trainer.model)
    assert ours_grads.keys() == trl_grads.keys()
    assert sum(float(g.abs().sum()) for g in ours_grads.values()) > 0
    for name, grad in ours_grads.items():
        torch.testing.assert_close(
            grad, trl_grads[name], rtol=1e-4, atol=1e-7, msg=lambda m, name=name: f"{name}: {m}"
        )


def test_on_policy_gspo_and_grpo_gradients_coincide(batch, tiny_model_dir):
    """REFERENCE 5: with one update per rollout, sequence and token ratios give the same gradient."""
    from transformers import AutoModelForCausalLM

    grads = []
    for level in ("sequence", "token"):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        ids = [batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
        logps, _ = completion_logps(model, *ids)
        cfg = PolicyUpdateConfig(importance_sampling_level=level)
        loss, _ = policy_loss(
            logps, logps.detach(), group_advantages(batch["rewards"], G), batch["completion_mask"], cfg
        )
        loss.backward()
        grads.append(_grads(model))
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], rtol=1e-4, atol=1e-7)


@given(st.lists(st.floats(-5, 5), min_size=8, max_size=8), st.sampled_from([2, 4, 8]))
def test_group_advantages_are_centred_per_group(rewards, group_size):
    adv = group_advantages(torch.tensor(rewards), group_size).view(-1, group_size)
    assert torch.allclose(adv.sum(dim=1), torch.zeros(adv.size(0)), atol=1e-3)
    grouped = torch.tensor(rewards).view(-1, group_size)
    equal = (grouped == grouped[:, :1]).all(dim=1)
    assert torch.all(adv[equal] == 0)


def test_padding_in_prompts_does_not_change_logps(tiny_model_dir):
    """Position ids follow the mask: a left-padded prompt scores like the unpadded one."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt, completion = [11, 12, 13], [14, 15, 16, 17]
    short = Completion(text="", token_ids=completion, prompt_token_ids=prompt)
    long = Completion(text="", token_ids=completion[:2], prompt_token_ids=[9, 10, 11, 12, 13])
    packed = RolloutBatch.from_completions([[short, long]], pad_token_id=0)
    alone = RolloutBatch.from_completions([[short]], pad_token_id=0)
    with torch.no_grad():
        a = completion_logps(
            model, packed.prompt_ids, packed.prompt_mask, packed.completion_ids, packed.completion_mask
        )[0][0]
        b = completion_logps(
            model, alone.prompt_ids, alone.prompt_mask, alone.completion_ids, alone.completion_mask
        )[0][0]
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lora", [None, LoraSettings(r=4, alpha=8)])
def test_updater_step_changes_trainable_weights_only(tiny_model_dir, lora):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    frozen_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    updater = PolicyUpdater(
        model, PolicyUpdateConfig(learning_rate=1e-2, beta=0.04, num_iterations=2, lora=lora)
    )
    trainable_before = {n: p.detach().clone() for n, p in updater.model.named_parameters() if p.requires_grad}
    groups = [
        [Completion(text="", token_ids=[20 + i, 30 + i, 40], prompt_token_ids=[5, 6, 7]) for i in range(4)]
    ]
    stats = updater.step(RolloutBatch.from_completions(groups, 0), torch.tensor([1.0, 0.0, 0.0, 1.0]))
    assert {"loss", "grad_norm", "clip_ratio", "kl", "learning_rate"} <= stats.keys()
    after = dict(updater.model.named_parameters())
    assert all(not torch.equal(after[n], p) for n, p in trainable_before.items())
    if lora is not None:  # the base weights stay: they are the KL reference
        base = {
            n.replace("base_model.model.", "").replace(".base_layer", ""): p
            for n, p in after.items()
            if "lora_" not in n
        }
        assert all(torch.equal(base[n], p) for n, p in frozen_before.items())
