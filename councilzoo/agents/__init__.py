"""Agents: the batched ``Agent`` protocol, LLM and simulated agents, controllers, generators.

Generator backends (``TransformersGenerator``, ``VLLMGenerator``, ``OpenAIGenerator``) are
imported lazily, so ``import councilzoo.agents`` never imports torch, vllm or httpx. Controllers
live in ``councilzoo.agents.controllers``, one module per kind of decision.
"""

from __future__ import annotations

from councilzoo.agents.base import Agent, Completion, Generator, Sampling
from councilzoo.agents.binding import AgentBinding, bind_agents
from councilzoo.agents.controllers import (
    ComedController,
    Controller,
    FixedController,
    RandomController,
    RegretMatchingController,
    default_mode,
)
from councilzoo.agents.llm import LLMAgent
from councilzoo.agents.parsing import parse_action, parse_mode
from councilzoo.agents.prompts import INSTRUCTIONS, ROLE_PROMPTS, render_messages
from councilzoo.agents.simulated import SimulatedAgent, TokenModel
from councilzoo.lazy import lazy_attributes

_LAZY = {
    "TransformersGenerator": "councilzoo.agents.generators",
    "VLLMGenerator": "councilzoo.agents.generators",
    "OpenAIGenerator": "councilzoo.agents.generators",
    "make_generator": "councilzoo.agents.generators",
    "GenerationError": "councilzoo.agents.generators",
    "ModelNotCachedError": "councilzoo.agents.generators",
    "GeneratorContractError": "councilzoo.agents.generators",
    "MissingExtraError": "councilzoo.agents.generators",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "INSTRUCTIONS", "ROLE_PROMPTS", "Agent", "AgentBinding", "ComedController", "Completion", "Controller",
    "FixedController", "Generator", "LLMAgent", "RandomController", "RegretMatchingController", "Sampling",
    "SimulatedAgent", "TokenModel", "bind_agents", "default_mode", "parse_action", "parse_mode",
    "render_messages",
    *_LAZY,
]
