"""Testing tools for users' own agents, controllers, games and learners, and the tiny offline models.

- ``councilzoo.testing.models``: tiny random Qwen3/Llama and VLMs built offline in a second
  (re-exported here, so ``from councilzoo.testing import build_tiny_model`` works).
"""

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
]
