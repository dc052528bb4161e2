"""The example in docs/agents.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "agents.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_agents_doc_example_runs(capsys):
    blocks = python_blocks(DOC.read_text())
    assert blocks, "docs/agents.md has no python example"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "docs_example"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4 and all("accuracy" in line for line in printed)
