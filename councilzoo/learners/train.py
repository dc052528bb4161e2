"""``councilzoo train LEARNER CONFIG``: Co-RL, its baselines, and TRACER.

Learners: ``corl`` (``CoRLConfig``), ``grpo`` / ``ttrl`` / ``rent`` / ``intuitor``
(``BaselineConfig``; the config's ``reward_rule`` must match the learner), ``tracer`` (handed to
``councilzoo.learners.tracer.main``). The config is loaded and validated before any model loads.

Multi-process Co-RL: start one process per member with ``COUNCILZOO_MEMBER=<index>`` in its
environment (or ``--member``), e.g. ``COUNCILZOO_MEMBER=1 accelerate launch -m councilzoo.cli
train corl CONFIG``; member 0 hosts the label store at ``distributed.host:port``. Each member then
writes ``metrics-<name>.jsonl`` and ``checkpoints-<name>/`` in the shared output folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from councilzoo.config import ConfigError, load_config

MEMBER_ENV = "COUNCILZOO_MEMBER"
LEARNERS = ("corl", "grpo", "ttrl", "rent", "intuitor", "tracer")


def _member_index(args: argparse.Namespace) -> int | None:
    value = getattr(args, "member", None)
    if value is None:
        value = os.environ.get(MEMBER_ENV)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ConfigError(f"{MEMBER_ENV} must be a member index, got {value!r}") from exc


def build_learner(learner: str, args: argparse.Namespace):
    """The configured learner (validated config, models loaded) and its member index or None."""
    from councilzoo.learners.baselines import BASELINE_RULES, Baseline, BaselineConfig
    from councilzoo.learners.corl import CoRL, CoRLConfig

    cls, config_cls = (CoRL, CoRLConfig) if learner == "corl" else (Baseline, BaselineConfig)
    cfg = load_config(args.config, config_cls)
    if learner in BASELINE_RULES and cfg.reward_rule != BASELINE_RULES[learner]:
        wanted = BASELINE_RULES[learner]
        raise ConfigError(f"{args.config}: {learner!r} needs reward_rule {wanted!r}, got {cfg.reward_rule!r}")
    if args.out:
        cfg = dataclasses.replace(cfg, output_dir=args.out)
    if args.max_steps:
        cfg = dataclasses.replace(cfg, max_steps=args.max_steps)
    member = _member_index(args)
    if member is None:
        return cls(cfg), None
    if learner != "corl":
        raise ConfigError(f"{MEMBER_ENV}/--member is for multi-process corl only, not {learner!r}")
    if not 0 <= member < len(cfg.members):
        raise ConfigError(f"member index must be in [0, {len(cfg.members)}), got {member}")
    return cfg, member


def run_member(cfg, member: int, resume: bool = False) -> None:
    """One member of a multi-process cohort: join, train, leave; any failure stops every member."""
    from councilzoo.learners.corl import CoRL
    from councilzoo.learners.distributed import CohortLink

    with CohortLink(cfg.distributed, member, len(cfg.members)) as link:
        CoRL(cfg, local=[member], link=link).train(resume=resume)


def main(args: argparse.Namespace) -> int:
    """Entry point of ``councilzoo train`` (see the module docstring)."""
    if args.learner not in LEARNERS:
        raise SystemExit(f"unknown learner {args.learner!r}; expected one of {LEARNERS}")
    if args.learner == "tracer":
        from councilzoo.learners import tracer

        return int(tracer.main(args.config, args) or 0)
    from councilzoo.learners.distributed import PeerFailure

    try:
        learner, member = build_learner(args.learner, args)
        if member is None:
            rows = learner.train(resume=args.resume)
            reward = rows[-1].get("reward", float("nan")) if rows else float("nan")
            print(f"{args.learner}: {learner.step_count} steps, last reward {reward:.3f}, in {learner.out}")
        else:
            run_member(learner, member, resume=args.resume)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except PeerFailure as exc:
        print(f"cohort stopped: {exc}", file=sys.stderr)
        return 3
    return 0
