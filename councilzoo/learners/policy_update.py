"""The policy update every councilzoo learner shares: GSPO (sequence ratio) or GRPO (token ratio).

GSPO (Zheng et al. 2025, arXiv 2507.18071) uses one importance ratio per sequence,
``s_i = exp(mean_t [log pi(y_it) - log pi_old(y_it)])``; GRPO (Shao et al. 2024) one per token.
Both maximise ``min(s A, clip(s, 1 - epsilon, 1 + epsilon_high) A)`` with the group-normalised
advantage ``A_i = (r_i - mean_group r) / (std_group r + 1e-4)``, optionally minus
``beta * KL(pi || pi_ref)`` (the k3 estimator, weighted by the ratio as in TRL). The loss is
TRL 1.16's ``GRPOTrainer._compute_loss`` term for term (``importance_sampling_level``
"sequence" | "token"; ``loss_type`` "grpo": mean over each sequence's tokens then over
sequences, or "bnpo": mean over all tokens); tests/test_policy_update.py checks loss and
gradients against TRL on identical inputs.

Why hand-written: a Co-RL cohort holds N models in one process, and TRL trainers in one process
share accelerate's global ``GradientState``. This module is the whole update (one forward, the
loss, clip, step) with no trainer loop; rollouts, rewards and credit assignment live elsewhere.

On-policy (``num_iterations == 1``) the ratio is 1, the clip is inactive, and the loss value is
``-mean(A) == 0`` for group-normalised advantages; its gradient is not zero.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from councilzoo.agents.base import Completion

ADVANTAGE_EPS = 1e-4  # TRL's std offset


@dataclass
class LoraSettings:
    """LoRA adapters through peft (only the adapters train; the base model is the KL reference)."""

    r: int = field(default=8, metadata={"help": "LoRA rank."})
    alpha: int = field(default=16, metadata={"help": "LoRA scaling numerator (lora_alpha)."})
    dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA branch."})
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata={"help": "Module names to adapt (peft's target_modules)."},
    )


@dataclass
class PolicyUpdateConfig:
    """GSPO / GRPO hyper-parameters; names and defaults follow TRL's ``GRPOConfig``."""

    importance_sampling_level: Literal["sequence", "token"] = field(
        default="sequence", metadata={"help": "'sequence' = GSPO (one ratio per completion), 'token' = GRPO."}
    )
    loss_type: Literal["grpo", "bnpo"] = field(
        default="grpo",
        metadata={
            "help": "'grpo': mean over each sequence's tokens, then over sequences; 'bnpo': over all tokens."
        },
    )
    epsilon: float = field(default=0.2, metadata={"help": "Lower clip range: ratio >= 1 - epsilon."})
    epsilon_high: float | None = field(
        default=None,
        metadata={
            "help": "Upper clip range: ratio <= 1 + epsilon_high (asymmetric clipping); "
            "None = epsilon. GSPO's paper uses 3e-4 / 4e-4."
        },
    )
    beta: float = field(
        default=0.0, metadata={"help": "KL coefficient to the reference model (0 = no reference)."}
    )
    use_bias_correction_kl: bool = field(
        default=True,
        metadata={
            "help": "Multiply the per-token KL by the importance ratio (unbiased reverse-KL "
            "gradient, DeepSeek-V3.2; TRL's default). Changes the gradient even on-policy."
        },
    )
    scale_rewards: Literal["group", "batch", "none"] = field(
        default="group",
        metadata={"help": "Divide advantages by the group std, the batch std, or not at all."},
    )
    temperature: float = field(
        default=1.0, metadata={"help": "Sampling temperature; logits are divided by it."}
    )
    num_iterations: int = field(default=1, metadata={"help": "Optimisation passes per rollout batch (mu)."})
    learning_rate: float = field(default=1e-6, metadata={"help": "AdamW learning rate."})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1."})
    adam_beta2: float = field(default=0.95, metadata={"help": "AdamW beta2 (Co-RL's release uses 0.95)."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip (<= 0 disables)."})
    lr_scheduler_type: str = field(
        default="constant", metadata={"help": "transformers scheduler name: constant, cosine, linear, ..."}
    )
    lr_scheduler_kwargs: dict[str, float] = field(
        default_factory=dict, metadata={"help": "Extra scheduler arguments, e.g. {min_lr_rate: 0.1}."}
    )
    warmup_ratio: float = field(default=0.0, metadata={"help": "Fraction of steps spent warming up the LR."})
    lora: LoraSettings | None = field(
        default=None, metadata={"help": "LoRA adapters; None trains all weights."}
    )

    def __post_init__(self) -> None:
        if self.epsilon_high is None:
            self.epsilon_high = self.epsilon
        if not 0 <= self.epsilon < 1 or self.epsilon_high < 0:
            raise ValueError(
                f"epsilon must be in [0, 1) and epsilon_high >= 0, got {self.epsilon}, {self.epsilon_high}"
            )
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.num_iterations < 1:
            raise ValueError(f"num_iterations must be >= 1, got {self.num_iterations}")


def group_advantages(rewards: torch.Tensor, group_size: int, scale: str = "group") -> torch.Tensor:
    """``(r - group mean) / (std + 1e-4)`` for rewards laid out group after group (TRL's rule).

    The std is unbiased (Bessel) like TRL's; ``scale="batch"`` divides by the batch std,
    ``"none"`` only centres. A group with equal rewards gets zero advantage (no signal).
    """
    rewards = rewards.float()
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
    if scale == "none":
        return centred
    if scale == "group":
        std = (
            grouped.std(dim=1, keepdim=True).expand_as(grouped).reshape(-1) if group_size > 1 else 0 * rewards
        )
    elif scale == "batch":
        std = rewards.std().expand_as(rewards) if rewards.numel() > 1 else 0 * rewards
    else:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    return centred / (std + ADVANTAGE_EPS)


def policy_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: PolicyUpdateConfig,
    ref_logps: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate loss (to minimise) and diagnostics, for (B, T) per-token log-probs.

    ``mask`` is 1 on trained completion tokens; ``advantages`` is (B,); ``ref_logps`` is needed
    when ``cfg.beta > 0``.
    """
    mask = mask.to(logps.dtype)
    adv = advantages.to(logps.dtype).unsqueeze(1)
    log_ratio = logps - old_logps
    if cfg.importance_sampling_level == "sequence":
        log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - cfg.epsilon, 1 + cfg.epsilon_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    kl = None
    if cfg.beta != 0.0:
        if ref_logps is None:
            raise ValueError("policy_loss: beta > 0 needs ref_logps")
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        if cfg.use_bias_correction_kl:
            kl = kl * ratio
        per_token = per_token + cfg.beta * kl
    if cfg.loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    else:  # bnpo
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    with torch.no_grad():
        is_clipped = ((ratio < 1 - cfg.epsilon) & (adv < 0)) | ((ratio > 1 + cfg.epsilon_high) & (adv > 0))
        tokens = mask.sum().clamp(min=1.0)
        stats = {"clip_ratio": float((is_clipped.expand_as(mask) * mask).sum() / tokens)}
        if kl is not None:
            stats["kl"] = float((kl * mask).sum() / tokens)
    return loss, stats


def completion_logps(
    model: nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float = 1.0,
    with_logits: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (B, T) of the completions under ``model``, logits divided by ``temperature``.

    Prompts are left-padded, completions right-padded. Position ids follow the attention mask, as
    in generation, so a left-padded prompt scores like an unpadded one. With ``with_logits`` the
    tempered completion logits (B, T, V) come back too (for entropy and self-certainty rewards).
    """
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    steps = completion_ids.size(1)
    logits = (
        model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            logits_to_keep=steps + 1,
        )
        .logits[:, :-1]
        .float()
        / temperature
    )
    logps = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return logps, (logits if with_logits else None)


@dataclass
class RolloutBatch:
    """G completions per prompt, padded into tensors; rows are grouped prompt after prompt."""

    prompt_ids: torch.Tensor  # (B, P) left-padded
    prompt_mask: torch.Tensor  # (B, P)
    completion_ids: torch.Tensor  # (B, T) right-padded
    completion_mask: torch.Tensor  # (B, T)
    group_size: int

    @classmethod
    def from_completions(cls, groups: list[list[Completion]], pad_token_id: int) -> RolloutBatch:
        """Pack ``generate``'s output (one list of G completions per prompt) into tensors."""
        flat = [c for group in groups for c in group]
        sizes = {len(g) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"every prompt needs the same number of completions, got sizes {sorted(sizes)}")
        prompt_len = max(len(c.prompt_token_ids) for c in flat)
        comp_len = max(1, max(len(c.token_ids) for c in flat))
        b = len(flat)
        prompt_ids = torch.full((b, prompt_len), pad_token_id, dtype=torch.long)
        prompt_mask = torch.zeros((b, prompt_len), dtype=torch.long)
        completion_ids = torch.full((b, comp_len), pad_token_id, dtype=torch.long)
        completion_mask = torch.zeros((b, comp_len), dtype=torch.long)
        for i, c in enumerate(flat):
            p, t = len(c.prompt_token_ids), len(c.token_ids)
            if p:
                prompt_ids[i, prompt_len - p :] = torch.tensor(c.prompt_token_ids)
                prompt_mask[i, prompt_len - p :] = 1
            if t:
                completion_ids[i, :t] = torch.tensor(c.token_ids)
                completion_mask[i, :t] = 1
        return cls(prompt_ids, prompt_mask, completion_ids, completion_mask, sizes.pop())

    def to(self, device: torch.device | str) -> RolloutBatch:
        return RolloutBatch(
            self.prompt_ids.to(device),
            self.prompt_mask.to(device),
            self.completion_ids.to(device),
            self.completion_mask.to(device),
            self.group_size,
        )


def apply_lora(model: nn.Module, lora: LoraSettings) -> nn.Module:
    """Wrap ``model`` with trainable LoRA adapters (peft); the base weights are frozen."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(
        model,
        LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=list(lora.target_modules),
            task_type="CAUSAL_LM",
        ),
    )


class PolicyUpdater:
    """One model's optimiser and GSPO/GRPO step.

    ``step(batch, rewards)`` normalises ``rewards`` (B,) into group advantages and runs
    ``cfg.num_iterations`` passes (forward, loss, backward, clip, AdamW step). The reference model
    for the KL term is the frozen initial model (with LoRA: the base with adapters disabled).
    """

    def __init__(self, model: nn.Module, cfg: PolicyUpdateConfig, num_training_steps: int = 1) -> None:
        from transformers import get_scheduler

        self.cfg = cfg
        if cfg.lora is not None and not hasattr(model, "peft_config"):
            model = apply_lora(model, cfg.lora)
        self.model = model
        self.ref_model = None
        if cfg.beta != 0.0 and cfg.lora is None:
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params,
            lr=cfg.learning_rate,
            betas=(cfg.adam_beta1, cfg.adam_beta2),
            weight_decay=cfg.weight_decay,
        )
        self.scheduler = get_scheduler(
            cfg.lr_scheduler_type,
            self.optimizer,
            num_warmup_steps=int(cfg.warmup_ratio * num_training_steps),
            num_training_steps=num_training_steps,
            scheduler_specific_kwargs=cfg.lr_scheduler_kwargs or None,
        )

    def _logps(self, model: nn.Module, batch: RolloutBatch) -> torch.Tensor:
        return completion_logps(
            model,
            batch.prompt_ids,
            batch.prompt_mask,
            batch.completion_ids,
            batch.completion_mask,
            self.cfg.temperature,
        )[0]

    @torch.no_grad()
    def _ref_logps(self, batch: RolloutBatch) -> torch.Tensor | None:
        if self.cfg.beta == 0.0:
            return None
        if self.ref_model is not None:
            return self._logps(self.ref_model, batch)
        with self.model.disable_adapter():
            return self._logps(self.model, batch)

    def step(self, batch: RolloutBatch, rewards: torch.Tensor) -> dict[str, float]:
        """Update the model on one rollout batch; returns loss, grad norm, clip ratio, (kl), lr."""
        cfg = self.cfg
        device = next(self.model.parameters()).device
        batch = batch.to(device)
        advantages = group_advantages(rewards.to(device), batch.group_size, cfg.scale_rewards)
        self.model.train()
        ref_logps = self._ref_logps(batch)
        old_logps = None
        if cfg.num_iterations > 1:
            with torch.no_grad():
                old_logps = self._logps(self.model, batch)
        totals: dict[str, float] = {}
        for _ in range(cfg.num_iterations):
            logps = self._logps(self.model, batch)
            old = logps.detach() if old_logps is None else old_logps
            loss, stats = policy_loss(logps, old, advantages, batch.completion_mask, cfg, ref_logps)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            params = [p for p in self.model.parameters() if p.requires_grad]
            max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
            grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
            self.optimizer.step()
            for key, value in {"loss": loss.item(), "grad_norm": grad_norm.item(), **stats}.items():
                totals[key] = totals.get(key, 0.0) + value / cfg.num_iterations
        self.scheduler.step()
        totals["learning_rate"] = self.scheduler.get_last_lr()[0]
        return totals
