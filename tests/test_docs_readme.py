"""README is a short front door whose examples run: the first plays a whole episode and prints what
README says it prints; the agents file is a valid council; the training snippet loads its config;
the install lines name extras that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from councilzoo.config import load_config
from councilzoo.evaluation.council import CouncilConfig

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_is_a_front_door_of_about_200_lines():
    text = README.read_text()
    assert len(text.splitlines()) <= 210
    assert text.index("```python") < text.index("| protocol | accuracy")  # code before results
    for command in ("make demo", "make test", "pip install"):
        assert command in text, command


def test_readme_example_plays_an_episode_and_prints_the_shown_output(capsys):
    usage = README.read_text().split("## Using it", 1)[1]
    code = re.search(r"```python\n(.*?)```", usage, flags=re.DOTALL).group(1)
    shown = re.search(r"```text\n(.*?)```", usage, flags=re.DOTALL).group(1)
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out
    assert printed == shown
    assert "reward +" in printed and "correct: True" in printed
    assert "class Follower" in code and '"peer_2": Follower()' in code  # a new agent plays


def test_readme_agents_file_is_a_valid_council_of_every_model_kind():
    [council_yaml] = blocks("yaml")
    council = load_config(yaml.safe_load(council_yaml), CouncilConfig)
    kinds = {spec.type for spec in council.models.values()}
    assert {"transformers", "openai"} <= kinds and any(":" in kind for kind in kinds)
    assert council.peers[0] in council.models and council.anchor in council.models


def test_readme_training_snippet_loads_its_config():
    [train] = [b for b in blocks("python") if "CoRL(config).train()" in b]
    setup = train.split("rows = ")[0]  # everything but the training itself (examples/corl_cpu.py runs one)
    namespace: dict = {}
    exec(compile(setup, str(README), "exec"), namespace)
    members = namespace["config"].members
    assert len(members) == 2 and len({m.tiny_family for m in members}) == 2


def test_readme_install_names_real_extras():
    pyproject = (ROOT / "pyproject.toml").read_text()
    table = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^(\w+) = \[", table, flags=re.M))
    install = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"\[([a-z,]+)\]", install)) | set(re.findall(r"`([a-z]+)` \(", install))
    assert named and all(set(group.split(",")) <= extras for group in named), (named, extras)
