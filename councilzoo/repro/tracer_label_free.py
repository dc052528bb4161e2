"""``councilzoo repro tracer-label-free``: TRACER's utterance layer with its label-free arms and its
single-agent GRPO control, 8 seeds.

The utterance part of ``councilzoo repro tracer`` (``tracer.utterance_part``) with all six arms
on the same seeds: the controllers alone, GSPO on gold role rewards, the three label-free
variants (``tracer.LABEL_FREE``: values and rewards against the consensus of the proposals, of the
proposals and the reviewer's stated answers, or of fresh samples the controllers do not
influence), and the single-agent control (``tracer.CONTROL``: the proposer trained alone by the
``grpo`` learner on gold rewards at the ``gspo`` arm's compute, then played under controllers
trained as in the controllers-alone arm). The label-free arms are reported, not checked (neither
paper makes a claim about them), and the control's checks are ``control`` checks (the gspo
arm's rules applied to it), so the verdict is the utterance part's own. They run here, with their
own time budget (docs/reproductions.md), because at 8 seeds they do not fit in ``repro all``'s 10
minutes; the gold arms are the same cells as ``repro tracer``'s (same seeds, same numbers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from councilzoo.repro import tracer
from councilzoo.repro.report import run_sections

__all__ = ["CLAIM", "FULL", "QUICK", "run"]

CLAIM = ("TRACER's GSPO utterance layer trains the proposer (gold role rewards), reported beside three "
         "label-free variants and the proposer trained alone by single-agent GRPO at equal compute")


def _every_arm(sizes: dict[str, Any]) -> dict[str, Any]:
    """``repro tracer``'s sizes with the label-free arms and the control at the utterance part's seeds."""
    return {**sizes, "utt_label_free_seeds": sizes["utt_seeds"], "utt_control_seeds": sizes["utt_seeds"]}


FULL = _every_arm(tracer.FULL)
QUICK = _every_arm(tracer.QUICK)


def run(out_dir: str | Path, seeds: int | None = None, quick: bool = False) -> dict[str, Any]:
    """The utterance part with every arm at ``seeds`` (default 8, ``--quick`` 2) into ``out_dir``."""
    sections = (("utterance", tracer.utterance_part),)
    return run_sections(CLAIM, sections, out_dir, seeds, QUICK if quick else FULL, {"quick": quick})
