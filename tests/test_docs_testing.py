"""docs/testing.md runs as written: its python blocks, in order and in one namespace, print exactly
what its text blocks show (each text block is the output of the python blocks before it). README's
"Using it" shows the kit's two-line use, which runs too."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "testing.md"


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def run_blocks(code: list[str], where: Path) -> None:
    """Execute ``code`` in one namespace, then restore the hypothesis profile the blocks load."""
    profile = settings.get_current_profile_name()
    namespace = {"__name__": "docs_example"}
    try:
        for block in code:
            exec(compile(block, str(where), "exec"), namespace)
    finally:
        settings.load_profile(profile)


# a learner's run reports its progress on stdout (councilzoo.progress): phases and step lines
PROGRESS = re.compile(r"^(councilzoo: .*|\S+ step \d+/\d+.*)\n", flags=re.MULTILINE)


def test_testing_doc_runs_and_prints_what_it_shows(capsys):
    text = DOC.read_text()
    code, shown = blocks(text, "python"), blocks(text, "text")
    assert len(code) >= 6 and len(shown) >= 6
    run_blocks(code, DOC)
    assert PROGRESS.sub("", capsys.readouterr().out) == "".join(shown)


def test_readme_shows_the_two_line_use_of_the_kit():
    usage = (ROOT / "README.md").read_text().split("## Using it", 1)[1].split("\n## ", 1)[0]
    [kit] = [b for b in blocks(usage, "python") if "councilzoo.testing" in b]
    assert 'checks.check_env("councilzoo/debate-v0")' in kit and len(kit.strip().splitlines()) == 2
    run_blocks([kit], ROOT / "README.md")
