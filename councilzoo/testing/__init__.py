"""Testing tools for users' own agents, controllers, games and learners, and the tiny offline models.

- ``councilzoo.testing.checks``: ``check_env(env)``, ``check_agent(agent)``,
  ``check_no_regret(make)``, ``check_gate(gate)`` and ``check_learner(learner, config, dir)``,
  plain functions that raise AssertionError with a shrunk counterexample (docs/testing.md; the
  last three live in ``regret``, ``gates`` and ``learners``, one module per kind of unit);
- ``councilzoo.testing.strategies``: hypothesis strategies for problems, model texts, actions,
  turn contexts, whole episodes, agents configs, games, utility sequences, gate signals and
  poisoned labels;
- ``councilzoo.testing.profiles``: the ``councilzoo-ci`` and ``councilzoo-deep`` hypothesis
  profiles, registered when it (or ``checks`` or ``strategies``) is imported;
  ``load_profile("ci")`` loads one;
- the tiny random Qwen3/Llama and VLMs built offline in a second, re-exported here from their
  home, ``councilzoo.tiny_models`` (``from councilzoo.testing import build_tiny_model`` works).

``checks``, ``strategies`` and ``profiles`` import hypothesis and ``pettingzoo.test``, so they are
imported when named (``from councilzoo.testing import checks``), not with the package: processes
that only build tiny models skip that second of imports.
"""

from councilzoo.tiny_models import (
    CHAT_TEMPLATE,
    EOS,
    FAMILIES,
    IMAGE_PLACEHOLDERS,
    IMAGE_TOKEN,
    VLM_CHAT_TEMPLATE,
    VLM_FAMILIES,
    build_tiny_model,
    build_tiny_vlm,
)


def load_profile(name: str) -> None:
    """Load the hypothesis profile ``name`` ("ci" or "deep"; see ``councilzoo.testing.profiles``)."""
    from councilzoo.testing import profiles

    profiles.load_profile(name)


__all__ = [
    "CHAT_TEMPLATE",
    "EOS",
    "FAMILIES",
    "IMAGE_PLACEHOLDERS",
    "IMAGE_TOKEN",
    "VLM_CHAT_TEMPLATE",
    "VLM_FAMILIES",
    "build_tiny_model",
    "build_tiny_vlm",
    "load_profile",
]
