"""councilzoo: game-theoretic multi-agent environments and learners for collaborating LLMs.

Importing the package registers the games (``councilzoo/debate-v0``, ``councilzoo/review-v0``,
``councilzoo/escalation-v0``, ``councilzoo/cohort-v0``) with PettingZoo's registry.
"""

__version__ = "0.1.0"

from councilzoo import envs as envs  # noqa: E402  (registers the games)

__all__ = ["__version__", "envs"]
