"""Lazy package attributes: a package's face can name classes whose modules import heavy
libraries (torch, TRL, vLLM), and those modules load on first use only."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``name`` is imported from ``modules[name]``
    on first access and kept in the package, so later lookups are plain attributes."""

    def __getattr__(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(modules[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
