"""README's first example plays a whole episode and prints what README says it prints."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_plays_an_episode_and_prints_the_shown_output(capsys):
    usage = README.read_text().split("## Using it", 1)[1]
    code = re.search(r"```python\n(.*?)```", usage, flags=re.DOTALL).group(1)
    shown = re.search(r"```text\n(.*?)```", usage, flags=re.DOTALL).group(1)
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out
    assert printed == shown
    assert "reward +" in printed and "correct: True" in printed
