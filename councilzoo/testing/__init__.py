"""Testing tools for users' own agents, controllers, games and learners, and the tiny offline models.

- ``councilzoo.testing.checks``: ``check_env(env)`` and ``check_agent(agent)``, plain functions
  that raise AssertionError with a shrunk counterexample (docs/testing.md);
- ``councilzoo.testing.strategies``: hypothesis strategies for problems, model texts, actions,
  turn contexts, whole episodes and agents configs;
- ``councilzoo.testing.profiles``: the ``councilzoo-ci`` and ``councilzoo-deep`` hypothesis
  profiles, registered on import; ``load_profile("ci")`` loads one;
- ``councilzoo.testing.models``: tiny random Qwen3/Llama and VLMs built offline in a second
  (re-exported here, so ``from councilzoo.testing import build_tiny_model`` works).
"""

from councilzoo.testing import checks, strategies
from councilzoo.testing.models import (
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
from councilzoo.testing.profiles import load_profile

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
    "checks",
    "load_profile",
    "strategies",
]
