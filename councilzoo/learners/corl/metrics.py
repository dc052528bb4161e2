"""Per-step diagnostics of label-free training: label quality, agreement, diversity, collapse.

All functions take extracted answers (None = no answer) and compare them up to equivalence with
``councilzoo.tasks.answers_equivalent``. Gold answers enter only ``label_accuracy`` and
``oracle_reward``: diagnostics that are logged, never used for a reward.

- ``answer_entropy``: Shannon entropy (nats) of one group's answer classes; "no answer" is a
  class of its own, so a group of G distinct answers has entropy log G and a unanimous one 0.
- ``distinct_answers``: number of distinct non-None answers in a group.
- ``pairwise_agreement``: over all member pairs and items, the share where both labels exist and
  are equivalent.
- ``_collapse_rate``: share of groups whose G samples all state the same answer. At 1.0 a member
  gets no GRPO signal under self-consistency rewards and no longer explores: the collapse that
  label-free intrinsic rewards show; Co-RL's peer rewards are meant to avoid it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from councilzoo.tasks import answers_equivalent, plurality

__all__ = [
    "Kinds", "answer_entropy", "distinct_answers", "pairwise_agreement", "label_accuracy",
    "oracle_reward", "group_diversity", "wrong_consensus",
]

Kinds = str | Sequence[str]  # one kind for every item, or one per item


def _kinds(kind: Kinds, n: int) -> list[str]:
    return [kind] * n if isinstance(kind, str) else list(kind)


def _answer_classes(answers: Sequence[str | None], kind: str) -> list[int]:
    """Class index of each answer up to equivalence (first-seen order); None is class -1."""
    reps: list[str] = []
    out = []
    for answer in answers:
        if answer is None:
            out.append(-1)
            continue
        for i, rep in enumerate(reps):
            if answers_equivalent(answer, rep, kind):
                out.append(i)
                break
        else:
            reps.append(answer)
            out.append(len(reps) - 1)
    return out


def answer_entropy(answers: Sequence[str | None], kind: str) -> float:
    """Entropy (nats) of the answer distribution of one group; "no answer" counts as a class."""
    classes = _answer_classes(answers, kind)
    if not classes:
        return 0.0
    counts = [classes.count(c) for c in set(classes)]
    n = len(classes)
    return -sum(c / n * math.log(c / n) for c in counts)


def distinct_answers(answers: Sequence[str | None], kind: str) -> int:
    """Number of distinct non-None answers in a group."""
    return len({c for c in _answer_classes(answers, kind) if c >= 0})


def _collapse_rate(groups: Sequence[Sequence[str | None]], kind: Kinds) -> float:
    """Share of groups in which every sample states the same (non-None) answer."""
    if not groups:
        return 0.0
    same = [
        len(g) > 0 and set(_answer_classes(g, k)) == {0}
        for g, k in zip(groups, _kinds(kind, len(groups)), strict=True)
    ]
    return sum(same) / len(groups)


def pairwise_agreement(labels_by_member: Sequence[Sequence[str | None]], kind: Kinds) -> float:
    """Mean over member pairs and items of 1[both labels exist and are equivalent]."""
    pairs = list(itertools.combinations(range(len(labels_by_member)), 2))
    if not pairs or not labels_by_member[0]:
        return float("nan")
    kinds = _kinds(kind, len(labels_by_member[0]))
    hits = [
        answers_equivalent(labels_by_member[a][i], labels_by_member[b][i], k)
        for a, b in pairs
        for i, k in enumerate(kinds)
    ]
    return sum(hits) / len(hits)


def label_accuracy(labels: Sequence[str | None], golds: Sequence[str | None], kind: Kinds) -> float:
    """Share of items whose label equals the gold answer (an unlabeled item counts as wrong).

    Items without gold are skipped; NaN when none has gold. Diagnostic only.
    """
    kinds = _kinds(kind, len(labels))
    scored = [
        answers_equivalent(lab, gold, k)
        for lab, gold, k in zip(labels, golds, kinds, strict=True)
        if gold is not None
    ]
    return sum(scored) / len(scored) if scored else float("nan")


def oracle_reward(groups: Sequence[Sequence[str | None]], golds: Sequence[str | None], kind: Kinds) -> float:
    """Mean ground-truth reward of all samples (what supervised GRPO would have paid). Diagnostic."""
    kinds = _kinds(kind, len(groups))
    scored = [
        answers_equivalent(a, gold, k)
        for group, gold, k in zip(groups, golds, kinds, strict=True)
        if gold is not None
        for a in group
    ]
    return sum(scored) / len(scored) if scored else float("nan")


def group_diversity(groups: Sequence[Sequence[str | None]], kind: Kinds) -> dict[str, float]:
    """Mean answer entropy, mean distinct answers and collapse rate over a member's groups."""
    n = max(1, len(groups))
    kinds = _kinds(kind, len(groups))
    return {
        "answer_entropy": sum(answer_entropy(g, k) for g, k in zip(groups, kinds, strict=True)) / n,
        "distinct_answers": sum(distinct_answers(g, k) for g, k in zip(groups, kinds, strict=True)) / n,
        "collapse": _collapse_rate(groups, kind),
    }


def wrong_consensus(
    groups: Sequence[Sequence[str | None]], golds: Sequence[str | None], kind: Kinds
) -> float:
    """Collapse onto a wrong answer: mean over groups of the plurality share when the plurality
    answer is wrong (0 when it is right or absent); groups without gold are skipped. Diagnostic."""
    kinds = _kinds(kind, len(groups))
    shares = []
    for group, gold, k in zip(groups, golds, kinds, strict=True):
        if gold is None:
            continue
        label, share = plurality(list(group), k)
        shares.append(share if label is not None and not answers_equivalent(label, gold, k) else 0.0)
    return sum(shares) / len(shares) if shares else float("nan")
