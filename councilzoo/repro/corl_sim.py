"""Simulated companion of the Co-RL reproduction: where do peer rewards tip into collapse?

Each cohort member is a tabular softmax policy over a problem's candidate answers: index 0 is the
gold answer, index 1 a *shared distractor* (the wrong answer that similar models share), the
rest member-specific slips. A member starts with one preferred answer per problem (its *mode*,
logit ``mode_logit`` above the others): gold with probability ``skill``, otherwise a wrong one.
The error-correlation knob ``rho`` sets how much the members' mistakes coincide: with
probability ``rho`` a member takes the cohort's shared draw for *whether* it errs on a problem
(else its own), and with probability ``rho`` its wrong mode is the shared distractor (else a
random slip). At ``rho = 0`` errors are independent; at ``rho = 1`` the members err on the same
problems with the same wrong answer.

Every step each member samples G answers per problem, the rewards come from
``councilzoo.envs.rewards.compute_rewards`` (the rule the LM learners use), and each member takes
a policy-gradient step with group-normalised advantages (GRPO's, without clipping: on-policy).
Measured at the end, per member and problem: greedy accuracy (argmax is gold) and *wrong
consensus* (the probability mass of the argmax when the argmax is wrong: the share of samples
that agree on a wrong answer, the collapse indicator of the LM runs).

``label_sweep`` instead sweeps the initial ``skill`` at one correlation, for the cohorts of the
LM regimes (``LABEL_COHORTS``), recording the starting *label precision* (the share of the first
step's peer labels that are gold, over labeled ones) against the gain in greedy accuracy;
``label_threshold`` reads off the precision where that gain first rises above a level.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from councilzoo.envs.rewards import compute_rewards

__all__ = [
    "RULES", "LETTERS", "SimConfig", "LABEL_COHORTS", "initial_logits", "measure", "train", "sweep",
    "label_sweep", "label_threshold",
]

RULES = ("ground_truth", "self_majority", "ring", "peer_majority")
LETTERS = "ABCDEFGHIJ"  # candidate i is answer LETTERS[i]; compared as multiple-choice letters


@dataclass(frozen=True)
class SimConfig:
    """The simulated cohort and the sweep."""

    members: int = 3  # 3, so that ring and peer_majority differ
    problems: int = 48
    candidates: int = 8  # gold, shared distractor, 6 member-specific slips
    skill: float = 0.6  # chance a member's initial mode is gold
    mode_logit: float = 1.5
    samples: int = 8  # G
    steps: int = 40
    learning_rate: float = 0.5
    correlations: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    # the label sweep (``label_sweep``): initial skill swept at one correlation
    skills: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    label_rho: float = 0.2


# The cohorts of the LM regimes (repro.corl.REGIMES): (members, peer rule).
LABEL_COHORTS = ((3, "peer_majority"), (2, "ring"))


def initial_logits(cfg: SimConfig, rho: float, rng: np.random.Generator) -> np.ndarray:
    """(members, problems, candidates) starting logits at error correlation ``rho``."""
    n, p, k = cfg.members, cfg.problems, cfg.candidates
    shared_draw = rng.random(p)
    own_draw = rng.random((n, p))
    draw = np.where(rng.random((n, p)) < rho, shared_draw, own_draw)
    slips = rng.integers(2, k, size=(n, p))
    wrong_mode = np.where(rng.random((n, p)) < rho, 1, slips)
    mode = np.where(draw < cfg.skill, 0, wrong_mode)
    logits = np.zeros((n, p, k))
    np.put_along_axis(logits, mode[..., None], cfg.mode_logit, axis=-1)
    return logits


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


@functools.lru_cache(maxsize=200_000)
def _rewards(rule: str, answers: tuple[tuple[str, ...], ...]) -> tuple[tuple[tuple[float, ...], ...], tuple]:
    """``compute_rewards`` on letters (gold is "A"), memoised: sharpened policies repeat often;
    the per-sample rewards and the per-member labels."""
    result = compute_rewards(rule, answers, "multiple_choice", gold="A")
    return tuple(map(tuple, result.rewards)), tuple(result.labels)


def _advantages(rewards: np.ndarray) -> np.ndarray:
    """GRPO's group-normalised advantages along the last axis (unbiased std + 1e-4)."""
    centred = rewards - rewards.mean(axis=-1, keepdims=True)
    return centred / (rewards.std(axis=-1, ddof=1, keepdims=True) + 1e-4)


def measure(logits: np.ndarray) -> dict[str, float]:
    """Greedy accuracy and wrong consensus, averaged over members and problems."""
    probs = _softmax(logits)
    top = probs.argmax(axis=-1)
    wrong_mass = np.where(top != 0, probs.max(axis=-1), 0.0)
    return {"accuracy": float((top == 0).mean()), "collapse": float(wrong_mass.mean())}


def train(cfg: SimConfig, rule: str, rho: float, seed: int) -> dict[str, float]:
    """Train one cohort under ``rule`` from the ``rho``-correlated start; start and end metrics."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    rng = np.random.default_rng(seed)
    logits = initial_logits(cfg, rho, rng)
    start = measure(logits)
    n, p, k, g = cfg.members, cfg.problems, cfg.candidates, cfg.samples
    eye = np.eye(k)
    labeled = right = 0
    for step in range(cfg.steps):
        probs = _softmax(logits)
        cdf = probs.cumsum(axis=-1)
        u = rng.random((n, p, g, 1))
        picks = np.minimum((u > cdf[:, :, None, :]).sum(axis=-1), k - 1)  # (n, p, g)
        rewards = np.empty((n, p, g))
        for j in range(p):
            answers = tuple(tuple(LETTERS[a] for a in picks[m, j]) for m in range(n))
            rewards[:, j], labels = _rewards(rule, answers)
            if step == 0:  # the labels of the starting policies: their precision over labeled ones
                labeled += sum(label is not None for label in labels)
                right += sum(label == "A" for label in labels)
        adv = _advantages(rewards)
        # d log pi(a) / d logits = onehot(a) - pi; mean over the group's samples
        grad = (adv[..., None] * (eye[picks] - probs[:, :, None, :])).mean(axis=2)
        logits += cfg.learning_rate * grad
    end = measure(logits)
    return {
        "start_accuracy": start["accuracy"],
        "start_collapse": start["collapse"],
        "accuracy": end["accuracy"],
        "collapse": end["collapse"],
        "label_precision": right / labeled if labeled else float("nan"),
    }


def sweep(cfg: SimConfig, seeds: int) -> list[dict[str, float | str]]:
    """One row per (rule, rho, seed)."""
    return [
        {"rule": rule, "rho": rho, "seed": seed, **train(cfg, rule, rho, seed)}
        for rule in RULES
        for rho in cfg.correlations
        for seed in range(seeds)
    ]


def label_sweep(cfg: SimConfig, seeds: int) -> list[dict[str, float | str]]:
    """One row per (cohort of ``LABEL_COHORTS``, skill, seed) at correlation ``cfg.label_rho``: the
    starting label precision (share of step-0 labels that are gold) against the accuracy gain."""
    rows = []
    for members, rule in LABEL_COHORTS:
        for skill in cfg.skills:
            sub = dataclasses.replace(cfg, members=members, skill=skill)
            for seed in range(seeds):
                r = train(sub, rule, cfg.label_rho, seed)
                rows.append({"cohort": f"{rule}, {members} members", "skill": skill, "seed": seed,
                             "label_precision": r["label_precision"],
                             "gain": r["accuracy"] - r["start_accuracy"]})
    return rows


def label_threshold(points: list[tuple[float, float]], level: float = 0.0) -> float | None:
    """The label precision where the gain first rises above ``level``, linearly interpolated
    between the (precision, gain) ``points`` sorted by precision; None when no point at or below
    ``level`` is followed by one above it (the gain never crosses it upward)."""
    points = sorted(points)
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if y0 <= level < y1:
            return x0 + (x1 - x0) * (level - y0) / (y1 - y0)
    return None
