"""Reference docs stay complete: every agents-config key with its default (docs/evaluation.md)
and every public name of councilzoo.theory with its parameters (docs/theory.md)."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
import yaml

import councilzoo.theory as theory
from councilzoo.agents.factory import ModelSpec
from councilzoo.evaluation.council import ComedSettings, CouncilConfig

DOCS = Path(__file__).resolve().parents[1] / "docs"


def table_rows(text: str) -> dict[str, list[str]]:
    """First cell (without backticks) -> the row's other cells, for every markdown table row."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 1:
            rows[cells[0].strip("`")] = cells[1:]
    return rows


@pytest.mark.parametrize("cls, prefix", [(CouncilConfig, ""), (ComedSettings, "comed."), (ModelSpec, "")])
def test_every_agents_config_key_is_documented_with_its_default(cls, prefix):
    rows = table_rows((DOCS / "evaluation.md").read_text().split("## Agents config", 1)[1])
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        assert key in rows, f"docs/evaluation.md: no row for {key!r}"
        default = rows[key][1]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            assert default.startswith("required"), key
        elif f.default is not dataclasses.MISSING:
            assert yaml.safe_load(default.strip("`")) == f.default, (key, default)


def test_every_public_theory_name_is_documented_with_its_parameters():
    api = (DOCS / "theory.md").read_text().split("## 6. API", 1)[1]
    for name in theory.__all__:
        obj = getattr(theory, name)
        match = re.search(rf"^\| `{name}(\(([^`]*)\))?`", api, flags=re.MULTILINE)
        assert match, f"docs/theory.md: {name} has no row in the API section"
        if callable(obj):
            args = [a.strip() for a in (match.group(2) or "").split(",")]
            documented = [a.split("=")[0] for a in args if a not in ("", "*")]
            assert documented == list(inspect.signature(obj).parameters), name
