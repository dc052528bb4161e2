"""Binding agents to an env's seats: a plain dict ``{agent name or role -> Agent}``.

Resolution for a turn of agent ``name`` playing role ``role`` (an escalation peer plays ``probe``
in the probe turn): ``mapping[name]``, else ``mapping[role]``, else ``mapping[static role of
name]``, else ``mapping["*"]``. So ``{"peer": a}`` seats ``a`` at every peer,
``{"peer": a, "peer_0": b}`` gives peer_0 its own agent, and ``{"*": a}`` lets one agent play
everything. ``bind_agents`` checks every seat once, before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from councilzoo.agents.base import Agent

__all__ = ["AgentBinding", "bind_agents"]

WILDCARD = "*"
# Roles an agent can take for a single turn besides its static role (escalation's peer probe).
_TURN_ROLES = frozenset({"probe"})


class AgentBinding:
    """The resolved seating of one env: ``agent_for(name, role)`` returns the Agent to call."""

    def __init__(self, mapping: Mapping[str, Agent], roles: Mapping[str, str]) -> None:
        self.mapping, self.roles = dict(mapping), dict(roles)

    def agent_for(self, name: str, role: str | None = None) -> Agent:
        for key in (name, role, self.roles.get(name), WILDCARD):
            if key is not None and key in self.mapping:
                return self.mapping[key]
        raise KeyError(
            f"no agent bound for agent {name!r} (role {role or self.roles.get(name)!r}); "
            f"bound keys: {sorted(self.mapping)}; bind it by name, by role, or with '*'"
        )

    def agents(self) -> list[Agent]:
        """Every distinct Agent object in the binding, in mapping order."""
        return list({id(a): a for a in self.mapping.values()}.values())


def bind_agents(env: Any, mapping: Mapping[str, Agent]) -> AgentBinding:
    """Check ``mapping`` against ``env``'s seats (``env.possible_agents``, ``env.roles``).

    Raises ``TypeError`` for a value without ``act`` and ``KeyError`` naming the first seat that
    no key covers (``ValueError`` for keys that match no seat or role, likely typos).
    """
    if not isinstance(mapping, Mapping) or not mapping:
        raise TypeError(f"agents must be a non-empty dict {{agent name or role: Agent}}, got {mapping!r}")
    for key, agent in mapping.items():
        if not isinstance(agent, Agent):
            raise TypeError(
                f"agents[{key!r}] is a {type(agent).__name__}; expected an Agent (with act(contexts))"
            )
    env = getattr(env, "unwrapped", env)
    roles = dict(getattr(env, "roles", {}))
    names = list(env.possible_agents)
    known = {*names, *roles.values(), WILDCARD, *_TURN_ROLES}
    unknown = [k for k in mapping if k not in known]
    if unknown:
        raise ValueError(
            f"agents keys {unknown} match no agent or role of {type(env).__module__}; "
            f"agents: {names}; roles: {sorted(set(roles.values()))}"
        )
    binding = AgentBinding(mapping, roles)
    for name in names:
        binding.agent_for(name, roles.get(name))
    return binding
