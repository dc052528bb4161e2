"""Reward rules of the cohort game (Co-RL and its baselines), as pure functions over answers.

Learners call :func:`compute_rewards` directly, without an env, so that training and evaluation
score samples with the same code. Input: ``answers_by_member[n][g]``, the extracted answer of
member n's g-th sample (None when it states none). Every rule first forms one *label* per member
and then rewards each sample 1 if its answer is equivalent to that label, else 0 (``peer_share``:
a share in [0, 1], below). An unlabeled member gets 0 for every sample (zero advantage in GRPO)
and is reported as unlabeled.

Rules (chosen by name):

- ``ground_truth``: the label is the gold answer (supervised GRPO); no gold -> unlabeled.
- ``self_majority`` (TTRL): the member's own plurality answer.
- ``ring`` (the Co-RL release): member n is taught by member (n + 1) mod N, i.e. its label is
  that peer's own plurality answer (A <- B <- C <- A; N = 2: each supervises the other).
- ``peer_majority`` (the Co-RL docstring): the plurality of the other N - 1 members' own labels;
  peers without a label abstain; a tie between the top labels -> unlabeled. With N = 3 a member
  is labeled only when its two peers agree, so the rule rewards nothing where the members differ.
- ``peer_share`` (councilzoo's, for N > 2 without unanimity): a sample's reward is the share of the
  labeled peers whose own label it matches, i.e. its expected reward against one peer teacher drawn
  at random. Two peers that disagree each lend 1/2 to their answer. The reported label is the peers'
  plurality, a tie going to the nearest peer in ring order (n + 1, n + 2, ...); unlabeled when no
  peer has a label. With N = 2 it equals ``ring``.

A member's *own label* is the plurality of its non-None answers (ties keep the first-seen
answer); it is None when no answer parses, or when the plurality share (over all G samples,
None included) is below ``tau`` (0 in the Co-RL launchers). Under ``ring`` and
``peer_majority`` (and ``peer_share``) a member's reward never depends on its own label, and gold
never enters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from councilzoo.tasks import answers_equivalent, plurality

__all__ = [
    "RULES", "PEER_RULES", "RewardResult", "own_label", "peer_majority_label",
    "compute_rewards",
]

RULES = ("ground_truth", "ring", "peer_majority", "peer_share", "self_majority")
PEER_RULES = frozenset({"ring", "peer_majority", "peer_share"})


@dataclass(frozen=True)
class RewardResult:
    """Per member: the label its samples were scored against, per-sample rewards, unlabeled flag."""

    labels: list[str | None]
    rewards: list[list[float]]
    unlabeled: list[bool]


def own_label(answers: Sequence[str | None], kind: str, tau: float = 0.0) -> str | None:
    """A member's plurality answer over its own samples, or None (no answer / share below tau)."""
    label, share = plurality(list(answers), kind)
    return label if label is not None and share >= tau else None


def peer_majority_label(labels: Sequence[str | None], kind: str) -> str | None:
    """Plurality of the given peer labels (None abstains); a tie at the top gives None."""
    votes = [label for label in labels if label is not None]
    top, share = plurality(votes, kind)
    if top is None:
        return None
    rest = [v for v in votes if not answers_equivalent(v, top, kind)]
    _, runner_up = plurality(rest, kind)
    return None if round(runner_up * len(rest)) == round(share * len(votes)) else top


def _peer_share_rewards(
    answers: Sequence[str | None], peer_labels: Sequence[str | None], kind: str
) -> tuple[str | None, list[float]]:
    """``peer_share``'s label and per-sample rewards for one member, from its peers' own labels in
    ring order (nearest first): reward = share of the labeled peers whose label the answer matches."""
    votes = [label for label in peer_labels if label is not None]
    if not votes:
        return None, [0.0] * len(answers)
    counts = [sum(answers_equivalent(v, w, kind) for w in votes) for v in votes]
    label = votes[counts.index(max(counts))]  # the first of the top: the nearest peer in ring order
    rewards = [sum(a is not None and answers_equivalent(a, v, kind) for v in votes) / len(votes)
               for a in answers]
    return label, rewards


def compute_rewards(
    rule: str,
    answers_by_member: Sequence[Sequence[str | None]],
    kind: str,
    gold: str | None = None,
    tau: float = 0.0,
) -> RewardResult:
    """Labels and per-sample 0/1 rewards for every member under ``rule`` (see the module docstring)."""
    if rule not in RULES:
        raise ValueError(f"unknown reward rule {rule!r}; expected one of {RULES}")
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau!r}")
    n = len(answers_by_member)
    if rule in PEER_RULES and n < 2:
        raise ValueError(f"reward rule {rule!r} needs at least 2 members, got {n}")
    if rule == "peer_share":
        own = [own_label(answers, kind, tau) for answers in answers_by_member]
        shared = [_peer_share_rewards(answers, [own[(i + k) % n] for k in range(1, n)], kind)
                  for i, answers in enumerate(answers_by_member)]
        labels = [label for label, _ in shared]
        return RewardResult(labels, [rewards for _, rewards in shared], [label is None for label in labels])
    if rule == "ground_truth":
        labels = [gold] * n
    else:
        own = [own_label(answers, kind, tau) for answers in answers_by_member]
        if rule == "self_majority":
            labels = own
        elif rule == "ring":
            labels = [own[(i + 1) % n] for i in range(n)]
        else:
            labels = [peer_majority_label(own[:i] + own[i + 1 :], kind) for i in range(n)]
    rewards = [
        [float(label is not None and answers_equivalent(a, label, kind)) for a in answers]
        for answers, label in zip(answers_by_member, labels, strict=True)
    ]
    return RewardResult(list(labels), rewards, [label is None for label in labels])
