"""`councilzoo demo`: the embedded default, its report, and the COMED acceptance targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from councilzoo.cli import main as cli_main
from councilzoo.evaluation.demo import DEMO_COUNCIL
from councilzoo.evaluation.report import pareto_frontier

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert cli_main(["demo", "--out", str(out)]) == 0
    for name in ("report.json", "report.md", "frontier.png", "rescue_harm.png"):
        assert (out / name).stat().st_size > 0, name
    return out


@pytest.fixture(scope="module")
def demo_report(demo_out) -> dict:
    return json.loads((demo_out / "report.json").read_text())


def _table(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| ")]


@pytest.mark.slow
def test_readme_shows_the_table_the_demo_prints(demo_out):
    """Labels, columns and numbers exactly as `councilzoo demo` writes them."""
    readme = (ROOT / "README.md").read_text()
    table = _table(readme.split("it measures:", 1)[1].split("(the table `councilzoo demo` prints", 1)[0])
    assert table == _table((demo_out / "report.md").read_text())


@pytest.mark.slow
def test_a_real_model_demo_into_the_simulated_demos_folder_is_refused(demo_out, capsys):
    """README's order (`make demo`, then `councilzoo demo --model ...`) never prints the old numbers."""
    report = (demo_out / "report.json").read_text()
    capsys.readouterr()
    assert cli_main(["demo", "--model", "councilzoo-tiny:qwen3", "--out", str(demo_out)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines and all("holds episodes played with other settings: " in line for line in lines)
    models = '["anchor", "judge", "peer_a", "peer_b", "peer_c"] -> ["llm"]'
    assert f"other settings: agents.models: {models}" in lines[0]
    assert (demo_out / "report.json").read_text() == report


def test_config_file_mirrors_the_embedded_default():
    assert yaml.safe_load((ROOT / "configs" / "demo_agents.yaml").read_text()) == DEMO_COUNCIL


@pytest.mark.slow
def test_report_has_every_protocol_with_accuracy_cost_rescue_harm(demo_report):
    protocols = demo_report["protocols"]
    assert set(protocols) == {
        "single",
        "self_consistency",
        "routing",
        "always_verify",
        "debate",
        "comed",
        "comed_learned",
        "comed_regret",
        "best_single_hindsight",
        "oracle_gate",
    }
    for name, row in protocols.items():
        for key in ("accuracy", "calls", "tokens", "rescue", "harm"):
            assert isinstance(row[key], float), (name, key)
        assert row["oracle"] == (name in ("best_single_hindsight", "oracle_gate"))
    assert demo_report["run"]["git_revision"] is None or len(demo_report["run"]["git_revision"]) == 40


@pytest.mark.slow
def test_comed_beats_dense_debate_at_lower_cost_on_the_harm_prone_default(demo_report):
    p = demo_report["protocols"]
    comed, debate, single = p["comed"], p["debate"], p["single"]
    assert debate["harm"] > comed["harm"]  # the pool is harm-prone and COMED avoids it
    assert comed["accuracy"] >= debate["accuracy"]
    assert comed["calls"] < debate["calls"] and comed["tokens"] < debate["tokens"]
    assert comed["accuracy"] > single["accuracy"]
    rows = list(p.values())
    assert "comed" in pareto_frontier(rows, "tokens") and "comed" in pareto_frontier(rows, "calls")


@pytest.mark.parametrize(
    "model, endpoint, backend",
    [("/models/qwen", None, "transformers"), ("served-name", "http://127.0.0.1:8000/v1", "openai")],
)
def test_model_and_endpoint_options_seat_one_real_model_everywhere(model, endpoint, backend):
    from councilzoo.config import load_config
    from councilzoo.evaluation.council import CouncilConfig
    from councilzoo.evaluation.demo import real_model_council

    council = load_config(real_model_council(model, endpoint), CouncilConfig)
    assert list(council.models) == ["llm"] and council.models["llm"].type == backend
    assert council.anchor == council.verifier == "llm" and council.peers == ["llm"] * 3
    assert council.models["llm"].kwargs["model"] == model
    assert "prompt_style" not in council.models["llm"].agent  # an unknown model keeps the default prompts


def test_a_named_real_model_demo_asks_in_its_recommended_prompt_style():
    """SmolLM2-135M-Instruct asked to think step by step rambles past its budget; the demo asks it
    for the number, with the eval configs' reply budget."""
    from councilzoo.config import load_config
    from councilzoo.evaluation.council import CouncilConfig
    from councilzoo.evaluation.demo import real_model_council

    council = load_config(real_model_council("smollm2-135m-instruct", None), CouncilConfig)
    agent = council.models["llm"].agent
    assert agent["prompt_style"] == "concise"
    assert agent["sampling"] == {"max_new_tokens": 48, "temperature": 0.7}
