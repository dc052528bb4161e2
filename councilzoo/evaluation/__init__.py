"""Evaluation: collaboration protocols (single, self-consistency, routing, debate, always-verify,
COMED and its gates, oracle rows), ``councilzoo eval`` and ``councilzoo demo``, their output folder,
reports and plots. The modules are imported by path (``councilzoo.evaluation.harness``, ...)."""

__all__: list[str] = []
