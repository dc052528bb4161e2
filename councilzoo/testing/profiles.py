"""Hypothesis profiles for the checkers and strategies, registered on import.

- ``councilzoo-ci``: derandomised (the same examples on every run), 10 examples a property, no
  deadline, no example database: a check of one game or agent takes seconds, for CI.
- ``councilzoo-deep``: 2,000 examples a property, random, no deadline: a long hunt before a release.

Load one by its short name with ``councilzoo.testing.load_profile("ci")``, or by its full name
with hypothesis' own ``settings.load_profile("councilzoo-ci")`` once this module is imported
(importing ``councilzoo.testing.checks`` or ``.strategies`` does it).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

PROFILES = {
    "ci": dict(
        derandomize=True,
        max_examples=10,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no slow "explain" phase
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
    "deep": dict(
        max_examples=2000,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ),
}

for _name, _options in PROFILES.items():
    settings.register_profile(f"councilzoo-{_name}", **_options)


def load_profile(name: str) -> None:
    """Make the profile ``name`` ("ci", "deep", or the full "councilzoo-ci" / "councilzoo-deep")
    hypothesis' default settings."""
    short = name.removeprefix("councilzoo-")
    if short not in PROFILES:
        raise ValueError(f"unknown councilzoo profile {name!r}; known: {sorted(PROFILES)}")
    settings.load_profile(f"councilzoo-{short}")


__all__ = ["load_profile"]
