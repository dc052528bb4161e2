"""TRACER's world process: ``python -m councilzoo.learners.tracer.world OUT/plan.json --world 0``.

What the launcher starts on each of a TRACER world's processes (under torchrun when there are
several; ``learners/placement.py``, ``plan_tracer``). It reads the plan (the resolved config and
the trainer's ``GRPOConfig`` arguments) and computes neither again (``learner.run_world``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from councilzoo.learners.corl.member import read_world
from councilzoo.learners.tracer.learner import run_world

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m councilzoo.learners.tracer.world OUT/plan.json --world 0``."""
    plan, world, _, cfg = read_world(argv, "councilzoo.learners.tracer.world")
    run_world(plan, world, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
