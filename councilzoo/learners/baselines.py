"""Baselines of the Co-RL paper on the same engine (TRL ``GRPOTrainer``), one learner each.

| learner     | reward rule       | reward of a sample                                       |
|-------------|-------------------|----------------------------------------------------------|
| ``grpo``    | ``ground_truth``  | 1[answer == gold] (supervised GRPO)                      |
| ``ttrl``    | ``self_majority`` | 1[answer == the member's own plurality answer] (TTRL)    |
| ``rent``    | ``entropy``       | -mean_t H(p_t) over completion tokens (RENT)             |
| ``intuitor``| ``self_certainty``| mean_t KL(U || p_t) over completion tokens (Intuitor)    |

The label rules play ``cohort-v0`` with one player, like Co-RL's peer rules with N; the intrinsic
ones are computed from the member's own next-token distributions at the sampling temperature,
before its update. Members of a baseline run train independently (N >= 1), each in its world.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from councilzoo.agents.generators.chat_template import apply_chat_template
from councilzoo.config import ConfigError
from councilzoo.learners.base import register_learner
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.learner import CoRL
from councilzoo.learners.corl.reward import CohortReward

__all__ = ["IntrinsicReward", "BaselineConfig", "Baseline", "GRPO", "TTRL", "RENT", "INTUITOR"]


def _token_entropy_reward(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RENT: minus the mean next-token entropy (nats) over each completion's tokens, (B,)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    mask = mask.to(entropy.dtype)
    return -(entropy * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def _self_certainty_reward(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Intuitor: mean over tokens of KL(U || p_t) = -log V - mean_v log p_t(v), (B,)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    kl = -math.log(logits.size(-1)) - logp.mean(-1)
    mask = mask.to(kl.dtype)
    return (kl * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


_INTRINSIC_REWARDS = {"entropy": _token_entropy_reward, "self_certainty": _self_certainty_reward}


class IntrinsicReward:
    """TRL reward function scoring each completion by the policy's own token distributions.

    Scores ``micro_batch`` completions per forward (the trainer's micro-batch), so the logits held
    at once are micro_batch x T x V, never the whole generation batch's.
    """

    def __init__(self, rule: str) -> None:
        self.__name__ = rule
        self.score = _INTRINSIC_REWARDS[rule]
        self.trainer: Any = None

    def bind(self, trainer: Any) -> None:
        """Attach the trainer, before any step; vision-language members are refused (their score
        would need the prompt's images in the forward pass, which this scorer does not feed)."""
        if hasattr(trainer.processing_class, "image_processor"):
            raise ValueError(
                f"reward rule {self.__name__!r} scores text-only members; this member is a "
                "vision-language model (use ground_truth, self_majority or a peer rule)"
            )
        self.trainer = trainer

    @torch.no_grad()
    def __call__(self, prompts, completions, completion_ids, **_: Any) -> list[float]:
        trainer = self.trainer
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        size = trainer.args.per_device_train_batch_size
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        out: list[float] = []
        for start in range(0, len(prompts), size):
            rows = []
            for prompt, comp in zip(
                prompts[start : start + size], completion_ids[start : start + size], strict=True
            ):
                text = apply_chat_template(tokenizer, prompt)
                rows.append((tokenizer(text, add_special_tokens=False)["input_ids"], list(comp)))
            width_p = max(len(p) for p, _ in rows)
            width_c = max(1, max(len(c) for _, c in rows))
            ids = torch.full((len(rows), width_p + width_c), pad, dtype=torch.long)
            attention = torch.zeros_like(ids)
            mask = torch.zeros((len(rows), width_c))
            for i, (p, c) in enumerate(rows):
                ids[i, width_p - len(p) : width_p] = torch.tensor(p)
                ids[i, width_p : width_p + len(c)] = torch.tensor(c, dtype=torch.long)
                attention[i, width_p - len(p) : width_p + len(c)] = 1
                mask[i, : len(c)] = 1
            device = next(model.parameters()).device
            position = (attention.cumsum(-1) - 1).clamp(min=0)
            logits = model(
                input_ids=ids.to(device),
                attention_mask=attention.to(device),
                position_ids=position.to(device),
                logits_to_keep=width_c + 1,
            ).logits[:, :-1]
            logits = logits.float() / trainer.args.temperature
            out.extend(self.score(logits, mask.to(device)).tolist())
        return out


@dataclass
class BaselineConfig(CoRLConfig):
    """A baseline run: any number of independent members and a non-peer reward rule."""

    RULES: ClassVar[tuple[str, ...]] = ("ground_truth", "self_majority", "entropy", "self_certainty")
    MIN_MEMBERS: ClassVar[int] = 1


class Baseline(CoRL):
    """A baseline (its ``RULE`` names the reward rule the config must use)."""

    config_class = BaselineConfig
    RULE: ClassVar[str]

    def __init__(self, cfg: BaselineConfig) -> None:
        super().__init__(cfg)
        if cfg.reward_rule != self.RULE:
            raise ConfigError(
                f"reward_rule: learner {self.name!r} needs {self.RULE!r}, got {cfg.reward_rule!r}"
            )

    @staticmethod
    def reward_functions(cfg, index, problems, link) -> list:
        if cfg.reward_rule in _INTRINSIC_REWARDS:
            return [IntrinsicReward(cfg.reward_rule)]
        return [CohortReward(cfg, index, problems, None)]


@register_learner
class GRPO(Baseline):
    """Supervised GRPO: rewarded against the gold answer."""

    name, RULE = "grpo", "ground_truth"


@register_learner
class TTRL(Baseline):
    """TTRL: rewarded against the member's own majority answer."""

    name, RULE = "ttrl", "self_majority"


@register_learner
class RENT(Baseline):
    """RENT: rewarded by low token entropy."""

    name, RULE = "rent", "entropy"


@register_learner
class INTUITOR(Baseline):
    """Intuitor: rewarded by self-certainty."""

    name, RULE = "intuitor", "self_certainty"

