"""The world of a ``shared_base`` group: its members' base loaded once, a LoRA adapter and a
``GRPOTrainer`` per member, in one process (``learners/shared_base.py`` says how they take turns).

``python -m councilzoo.learners.corl.shared_world OUT/plan.json --world I`` is what the launcher
starts for a group: the placement plan (``learners/placement.py``) holds the group as one world of
several members, with each member's ``GRPOConfig`` arguments, which the world reads as a lone
member's world does (``member.read_world``, ``member.member_settings``). When the whole cohort is
the group, the members exchange their labels in process (``LocalExchange``); when members of other
worlds take part, every member of the group joins the cohort link as a member of its own
(``PausingLink`` over a ``CohortLink``).
Each member keeps its folder (``members/<name>/``: metrics, ``checkpoint-N`` with its adapter
under ``<name>/``, ``final/<name>/``) and resumes from the checkpoint the cohort agrees on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import partial
from typing import Any

from councilzoo.envs.rewards import PEER_RULES
from councilzoo.learners import engine
from councilzoo.learners.corl.config import CoRLConfig
from councilzoo.learners.corl.link import CohortLink
from councilzoo.learners.corl.member import (
    last_row,
    member_model_path,
    member_settings,
    member_trainer,
    quiet_loading,
    read_world,
    resume_checkpoint,
    save_member,
)
from councilzoo.learners.placement import Placement
from councilzoo.learners.shared_base import (
    AdapterTurns,
    LocalExchange,
    PausingLink,
    load_shared_base,
    run_threads,
)

__all__ = ["run_shared_base", "main"]


def run_shared_base(
    cfg: CoRLConfig, indices: Sequence[int], reward_functions: Callable[..., list], resume: bool = False,
    plan: Placement | None = None,
) -> list[dict[str, float]]:
    """Train the members ``indices`` (one ``shared_base`` group) on one copy of their base;
    returns each member's last logged row. The settings are the ``plan``'s where given, as
    ``member.run_member``'s."""
    quiet_loading()
    names = [cfg.members[i].name for i in indices]
    settings = {i: member_settings(cfg, i, plan) for i in indices}
    fingerprint = settings[indices[0]][1]
    adapters = {cfg.members[i].name: cfg.members[i].peft for i in indices}
    model = load_shared_base(member_model_path(cfg, indices[0]), adapters, cfg.seed)
    turns = AdapterTurns(model)
    local = len(indices) == len(cfg.members) and cfg.reward_rule in PEER_RULES
    exchange = LocalExchange(len(cfg.members), turns) if local else None
    cohort_links = {}
    if cfg.reward_rule in PEER_RULES and not local:  # members of other worlds take part
        cohort_links = {
            i: CohortLink(cfg.distributed, i, len(cfg.members), "cohort", fingerprint) for i in indices
        }
    trainers = []
    for i, name in zip(indices, names, strict=True):
        link = exchange.link(i, name) if exchange else None
        if i in cohort_links:
            link = PausingLink(cohort_links[i], turns, name)
        model.set_adapter(name)
        args, _ = settings[i]
        trainers.append(member_trainer(cfg, i, args, fingerprint, reward_functions, link, shared_base=model))
        turns.save_rng(name)
    _run_threads(cfg, indices, trainers, turns, exchange, cohort_links, resume)
    for trainer in trainers:
        engine.leave_world(trainer)
    return [last_row(trainer) for trainer in trainers]


def _run_threads(
    cfg: CoRLConfig, indices: Sequence[int], trainers: list[Any], turns: AdapterTurns,
    exchange: LocalExchange | None, cohort_links: dict[int, CohortLink], resume: bool,
) -> None:
    """One thread per member: join the cohort, agree on the checkpoint, then train in turns. The
    first failure stops the others (the in-process exchange fails; a cohort link aborts the cohort
    when its ``with`` body raises) and is raised here."""
    common = None  # without a cohort link, the newest checkpoint every member of the group holds
    if resume and not cohort_links:
        held = [set(engine.checkpoint_steps(cfg.member_dir(i))) for i in indices]
        common = max(set.intersection(*held), default=None)

    def member(i: int, trainer: Any) -> None:
        name = cfg.members[i].name
        link = cohort_links.get(i)
        with link if link is not None else nullcontext():  # joins and leaves with the cohort
            if link is not None:
                checkpoint = resume_checkpoint(cfg, i, link, resume)
            else:
                checkpoint = None if common is None else str(cfg.member_dir(i) / f"checkpoint-{common}")
            with turns.turn(name):
                trainer.train(resume_from_checkpoint=checkpoint)
                save_member(cfg, i, trainer)

    jobs = {f"member {cfg.members[i].name}": partial(member, i, t)
            for i, t in zip(indices, trainers, strict=True)}
    run_threads(jobs, exchange.fail if exchange is not None else None)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m councilzoo.learners.corl.shared_world OUT/plan.json --world I``."""
    plan, world, learner, cfg = read_world(argv, "councilzoo.learners.corl.shared_world")
    indices = [m.index for m in world.members]
    run_shared_base(cfg, indices, learner.reward_functions, resume=plan.resume, plan=plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
