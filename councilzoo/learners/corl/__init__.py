"""Co-RL: a cohort of decoupled models, each trained by its own TRL ``GRPOTrainer`` in its own world.

Co-RL and its baselines are one learner (``CoRL``) with different reward rules. Each member is one
``torchrun`` / ``accelerate launch`` world (any number of processes: data parallel, ZeRO, FSDP)
that runs ``python -m councilzoo.learners.corl.member OUT/plan.json --world i`` (``placement.py``
plans the worlds). The members share no parameters and no process group; only each world's main
process joins the cohort link (``link.py``), over which own labels travel keyed by (round, problem
key). The exception is a ``shared_base`` group: one world of one process
(``shared_world.py``) in which each member trains a LoRA adapter on one copy of the group's base.

Modules: ``config.py`` (``CoRLConfig``: the members and their settings), ``learner.py`` (``CoRL``),
``reward.py`` (``CohortReward``), ``rounds.py`` (the items of each round and the prompt rows),
``member.py`` (one member's world), ``shared_world.py`` (a ``shared_base`` group's world),
``launch.py`` (the launcher), ``link.py`` (the cohort link), ``seeded_sampling.py`` and
``metrics.py``; the trainer itself is ``learners/engine.py``.

Per generation round TRL samples G completions of every item for the member (its own paraphrase
view), then calls ``CohortReward``, which:

1. gathers the completions of the round across the member's world (TRL spreads a prompt's G
   copies over processes), and forms the member's *own label* of each item;
2. exchanges own labels with the peers (peer rules only);
3. plays ``councilzoo/cohort-v0`` for each item, the member acting with its G texts and every
   peer by its own label (all the peer rules read of it), and returns the game's per-sample
   rewards for this process's completions.

Gold answers never reach a label-free reward: the problems the game sees carry none, and the
gold table feeds only the logged diagnostics (label accuracy, oracle reward).

``launch_cohort`` is the one command that starts a whole cohort on one node (each member on its
own devices), waits for it, and stops every member when one fails.

``from councilzoo.learners.corl import CoRL, CoRLConfig`` imports them lazily (they pull in
torch), so a member world's ``python -m councilzoo.learners.corl.member`` loads only what it uses.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"CoRL": "councilzoo.learners.corl.learner", "CoRLConfig": "councilzoo.learners.corl.config"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'councilzoo.learners.corl' has no attribute {name!r}")


__all__ = ["CoRL", "CoRLConfig"]
