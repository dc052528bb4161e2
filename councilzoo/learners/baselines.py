"""Baselines of the Co-RL paper, on the same machinery (sampling, GSPO/GRPO step, metrics).

| learner    | reward rule      | reward of a sample                                        |
|------------|------------------|-----------------------------------------------------------|
| ``grpo``   | ``ground_truth`` | 1[answer == gold] (supervised GRPO)                       |
| ``ttrl``   | ``self_majority``| 1[answer == the member's own plurality answer] (TTRL)     |
| ``rent``   | ``entropy``      | -mean_t H(p_t) over completion tokens (RENT)              |
| ``intuitor``| ``self_certainty``| mean_t KL(U || p_t) over completion tokens (Intuitor)    |

Label rules come from ``councilzoo.envs.rewards`` like Co-RL's; the intrinsic ones are computed
here from the member's own next-token distributions at the policy temperature, before its update.
Members of a baseline run train independently (N >= 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from councilzoo.learners.corl import CohortConfig, CohortLearner
from councilzoo.learners.policy_update import RolloutBatch, completion_logps

BASELINE_RULES = {
    "grpo": "ground_truth",
    "ttrl": "self_majority",
    "rent": "entropy",
    "intuitor": "self_certainty",
}


def token_entropy_reward(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RENT: minus the mean next-token entropy (nats) over each completion's tokens, (B,)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    mask = mask.to(entropy.dtype)
    return -(entropy * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def self_certainty_reward(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Intuitor: mean over tokens of KL(U || p_t) = -log V - mean_v log p_t(v), (B,)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    kl = -math.log(logits.size(-1)) - logp.mean(-1)
    mask = mask.to(kl.dtype)
    return (kl * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


INTRINSIC_REWARDS = {"entropy": token_entropy_reward, "self_certainty": self_certainty_reward}


@dataclass
class BaselineConfig(CohortConfig):
    """A baseline run: any number of independent members and a non-peer reward rule."""

    RULES: ClassVar[tuple[str, ...]] = tuple(BASELINE_RULES.values())
    MIN_MEMBERS: ClassVar[int] = 1


class Baseline(CohortLearner):
    """Supervised GRPO, TTRL, RENT or Intuitor, chosen by ``cfg.reward_rule``."""

    config_class = BaselineConfig

    def rewards(self, step, problems, answers, batches):
        rule = self.cfg.reward_rule
        if rule not in INTRINSIC_REWARDS:
            return super().rewards(step, problems, answers, batches)
        rewards = {}
        for member in self.members:
            batch: RolloutBatch = batches[member.index].to(member.model.device)
            with torch.no_grad():
                _, logits = completion_logps(
                    member.model,
                    batch.prompt_ids,
                    batch.prompt_mask,
                    batch.completion_ids,
                    batch.completion_mask,
                    self.cfg.policy.temperature,
                    with_logits=True,
                )
            rewards[member.index] = INTRINSIC_REWARDS[rule](logits, batch.completion_mask).cpu()
        labels = {m: [None] * len(problems) for m in answers}
        return rewards, labels, [[None] * len(problems) for _ in self.cfg.members]
