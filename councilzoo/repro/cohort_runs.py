"""Shared by the Co-RL reproduction's parts (``corl`` text, ``corl_vlm_code`` vision-language and
code): sampling a member's answers, the majority precondition and the peer labels a rule would
give, training one cohort on the engine users run, and the per-seed mean with its interval."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from councilzoo.agents.base import Sampling
from councilzoo.agents.prompts import member_prompt
from councilzoo.envs.rewards import compute_rewards
from councilzoo.learners.baselines import GRPO, TTRL, BaselineConfig
from councilzoo.learners.corl import CoRL, CoRLConfig
from councilzoo.learners.corl.config import EvalConfig, MemberConfig
from councilzoo.learners.corl.link import DistributedConfig
from councilzoo.learners.data import DataConfig
from councilzoo.learners.logging import read_metrics
from councilzoo.repro.tiny_lms import MAX_NEW_TOKENS, torch_threads
from councilzoo.tasks import Problem, answers_equivalent, answers_for_batch, plurality
from councilzoo.theory.stats import seed_interval

__all__ = [
    "MAJORITY_BAND", "majority_accuracy", "peer_label_stats", "sample_answers", "train_cohort", "seed_ci",
]

MAJORITY_BAND = (0.55, 0.75)  # the in-regime precondition: each member's majority-of-G accuracy
LEARNERS = {"grpo": (GRPO, BaselineConfig), "ttrl": (TTRL, BaselineConfig), "corl": (CoRL, CoRLConfig)}


def majority_accuracy(
    answers: Sequence[Sequence[str | None]], golds: Sequence[str], kind: str | Sequence[str] = "numeric"
) -> float:
    """Share of items whose plurality answer (``tasks.plurality``: ties keep the first seen, no
    answer counts wrong) equals the gold one; ``answers[i]`` are the G sampled answers of item i,
    ``kind`` one answer kind for all items or one per item."""
    if len(answers) != len(golds):
        raise ValueError(f"{len(answers)} answer groups for {len(golds)} gold answers")
    hits = [(label := plurality(list(group), k)[0]) is not None and answers_equivalent(label, gold, k)
            for group, gold, k in zip(answers, golds, _kinds(kind, len(golds)), strict=True)]
    return float(np.mean(hits)) if hits else float("nan")


def peer_label_stats(
    answers: Sequence[Sequence[Sequence[str | None]]], golds: Sequence[str], rule: str,
    kind: str | Sequence[str] = "numeric",
) -> dict[str, float]:
    """The labels ``rule`` would give from samples ``answers[member][item][g]`` (``compute_rewards``):
    per member, the share of items labeled (``coverage``) and of labeled items whose label is gold
    (``precision``, the peer-label accuracy that decides which way a member is pushed), averaged."""
    right, labeled = np.zeros(len(answers)), np.zeros(len(answers))
    for i, (gold, k) in enumerate(zip(golds, _kinds(kind, len(golds)), strict=True)):
        labels = compute_rewards(rule, [member[i] for member in answers], k).labels
        for m, label in enumerate(labels):
            labeled[m] += label is not None
            right[m] += label is not None and answers_equivalent(label, gold, k)
    precision = np.where(labeled > 0, right / np.maximum(labeled, 1), np.nan)
    return {"precision": float(np.nanmean(precision)), "coverage": float(np.mean(labeled / len(golds)))}


def _kinds(kind: str | Sequence[str], n: int) -> list[str]:
    return [kind] * n if isinstance(kind, str) else list(kind)


def sample_answers(model: str | Path, problems: Sequence[Problem], view: int, generations: int,
                   temperature: float, seed: int, max_new_tokens: int = MAX_NEW_TOKENS,
                   ) -> list[list[str | None]]:
    """``generations`` sampled answers per item from a member's own prompt (its view, with the images
    for a vision-language model), as in training; a program's answer is its output signature."""
    from councilzoo.agents.generators.transformers_backend import TransformersGenerator

    generator = TransformersGenerator(str(model), batch_size=256, seed=seed)
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    prompts = [member_prompt(p, view, with_images=generator.accepts_images) for p in problems]
    with torch_threads():
        groups = generator.generate(prompts, n=generations, sampling=sampling)
    return answers_for_batch([(p, [c.text for c in g]) for g, p in zip(groups, problems, strict=True)])


def train_cohort(
    kind: str, rule: str, members: Sequence[tuple], seed: int, settings: dict,
    data: DataConfig, evaluation: EvalConfig, out: Path, trainer: dict[str, Any],
    max_completion_length: int = MAX_NEW_TOKENS, peft: dict[str, Any] | None = None,
    prompt_style: str = "default", seeded_sampling: bool = False,
) -> dict[str, list[float]]:
    """Per-step curves of one cohort (members: (name, model folder, view), optionally with a dict of
    the member's own ``MemberConfig`` settings such as ``prompt_style`` and ``stop``) trained by
    ``kind``'s learner under ``rule`` on the engine users run (``councilzoo train``: one world per
    member; ``peft``: every member's LoRA settings, None for full weights; ``prompt_style`` the
    members' default):
    greedy accuracy on ``evaluation`` (at eval steps, else NaN) and the learners' logged diagnostics
    (label accuracy with unlabeled items counted wrong, label precision over labeled items only,
    answer entropy, wrong consensus), means over members; and the first member's accuracy and wrong
    consensus alone (``first_member_*``: compared with a cohort of its copies, both start from one
    checkpoint)."""
    learner_class, config_class = LEARNERS[kind]
    cfg = config_class(
        members=[MemberConfig(name=f"m{i}-{name}", model=model, view=view, peft=peft,
                              **(own[0] if own else {}))
                 for i, (name, model, view, *own) in enumerate(members)],
        reward_rule=rule,
        num_generations=settings["generations"],
        prompts_per_step=settings["prompts"],
        max_steps=settings["steps"],
        max_completion_length=max_completion_length,
        seed=seed,
        output_dir=str(out),
        data=data,
        eval=evaluation,
        trainer=trainer,
        distributed=DistributedConfig(port=_free_port()),
        prompt_style=prompt_style,
        seeded_sampling=seeded_sampling,
        warm_start=True,  # many short runs: each world forks from one import of torch and TRL
    )
    learner_class(cfg).train(overwrite=True)
    steps = settings["steps"]
    curves: dict[str, list[float]] = {"accuracy": [float("nan")] * (steps + 1)}
    per_member: dict[str, list[list[float]]] = {
        k: [] for k in ("wrong_consensus", "label_accuracy", "label_precision", "answer_entropy")
    }
    evals: dict[int, list[float]] = {}
    for i in range(len(cfg.members)):
        rows = {r["step"]: r for r in read_metrics(cfg.member_dir(i) / "metrics.jsonl") if "reward" in r}
        for r in rows.values():  # over labeled items only; NaN when the step labeled none
            covered = 1.0 - _num(r.get("unlabeled", 0.0))
            r["label_precision"] = _num(r.get("label_accuracy")) / covered if covered > 0 else None
        for key, series in per_member.items():
            series.append([_num(rows.get(s, {}).get(key)) for s in range(1, steps + 1)])
        for r in read_metrics(cfg.member_dir(i) / "eval.jsonl") if evaluation.eval_steps else []:
            evals.setdefault(r["step"], []).append(r["accuracy"])
    curves["first_member_accuracy"] = list(curves["accuracy"])
    for step, values in evals.items():
        curves["accuracy"][step] = float(np.mean(values))
        curves["first_member_accuracy"][step] = float(values[0])  # members are read in order
    for key, series in per_member.items():
        curves[key] = [float(v) for v in np.nanmean(np.array(series, dtype=float), axis=0)]
    curves["first_member_wrong_consensus"] = [float(v) for v in per_member["wrong_consensus"][0]]
    return curves


def _num(value) -> float:
    return float("nan") if value is None else float(value)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_ci(values) -> list[float | None]:
    """[mean, lo, hi]: the mean over seeds (training runs, the unit) and its 95% t interval; no
    interval (None) for one seed."""
    return seed_interval(values)
