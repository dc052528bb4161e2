"""The evaluation harness: rescue-harm identity, dev/test separation, router, report, resume, config."""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from councilzoo.config import ConfigError, load_config
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.demo import DEMO_COUNCIL
from councilzoo.evaluation.harness import Evaluation, main
from councilzoo.evaluation.report import pareto_frontier
from councilzoo.evaluation.router import LogisticRouter, route
from councilzoo.tasks import Problem, synthetic_problems

ROOT = Path(__file__).resolve().parents[1]


def small_council(**comed) -> CouncilConfig:
    cfg = copy.deepcopy(DEMO_COUNCIL)
    cfg["comed"] = {**cfg["comed"], "dev_size": 60, **comed}
    return load_config(cfg, CouncilConfig)


@pytest.fixture(scope="module")
def evaluation() -> Evaluation:
    test = synthetic_problems("numeric", 60, seed=0)
    dev = synthetic_problems("numeric", 60, seed=10_000)
    return Evaluation(small_council(), test, dev, progress=False)


def test_rescue_minus_harm_is_exactly_the_accuracy_change(evaluation):
    for name in (
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
    ):
        result = evaluation.result(name)
        row = result.summary()
        counts = row["counts"]
        assert counts["rescue"] - counts["harm"] == counts["accuracy"] - counts["anchor_accuracy"], name
        assert counts["accuracy"] == int(result.correct.sum()), name
        assert row["net"] == pytest.approx(row["accuracy"] - row["anchor_accuracy"], abs=1e-12), name


def test_each_rate_and_the_calls_come_with_a_bootstrap_interval_around_them(evaluation):
    for name in ("self_consistency", "debate", "comed"):
        row = evaluation.result(name).summary()
        for key in ("accuracy", "rescue", "harm", "calls"):
            lo, hi = row[f"{key}_ci"]
            assert lo <= row[key] <= hi, (name, key)
    debate = evaluation.result("debate").summary()  # on the harm-prone default it rescues and harms
    assert debate["rescue_ci"][0] > 0 and debate["harm_ci"][0] > 0
    comed = evaluation.result("comed").summary()
    assert comed["calls_ci"][1] > comed["calls_ci"][0]  # the gate escalates some problems only


def test_costs_count_anchor_samples_and_probe(evaluation):
    single, sc, comed = (evaluation.result(n) for n in ("single", "self_consistency", "comed"))
    samples = evaluation.council.samples
    assert sc.tokens.mean() == pytest.approx(samples * single.tokens.mean())
    probed = comed.collaborated  # every collaboration path starts with the peer probe
    assert np.all(comed.tokens[probed] > sc.tokens[probed])
    assert np.all(comed.calls >= sc.calls)


def test_oracles_are_labelled_and_bound_the_gate(evaluation):
    gate, comed, debate = (evaluation.result(n) for n in ("oracle_gate", "comed", "debate"))
    assert gate.oracle and evaluation.result("best_single_hindsight").oracle and not comed.oracle
    assert gate.correct.mean() >= max(comed.correct.mean(), comed.anchor_correct.mean())
    assert np.array_equal(gate.correct, comed.anchor_correct | debate.correct)


def test_progress_bars_name_protocol_and_split_and_each_phase_prints_one_line(capsys):
    test = synthetic_problems("numeric", 20, seed=0)
    dev = synthetic_problems("numeric", 20, seed=10_000)
    Evaluation(small_council(), test, dev, progress=True).result("comed")
    out, err = capsys.readouterr()
    bars = {line.split(":")[0].strip() for line in err.replace("\r", "\n").splitlines() if "|" in line}
    assert bars == {
        "dev fit · router",  # "dev fit · router: <model> alone", one bar per model
        "dev fit · comed probe_verify", "dev fit · comed probe_escalate", "dev fit · comed escalate",
        "anchor samples · test",  # self-consistency's episodes, whose anchor turns the gates replay
        "comed · test",
    }
    router, fit, played = out.splitlines()
    assert router.startswith("dev fit · router: 20 problems per model, accuracy alone anchor ")
    assert re.match(r"dev fit · comed: 60 episodes, thresholds tau_accept=\S+ .*; dev accuracy 0\.\d+", fit)
    assert re.match(r"comed · test: 20 episodes, accuracy 0\.\d{3}, \d\.\d\d calls/question$", played)


def test_dev_and_test_must_not_overlap():
    problems = synthetic_problems("numeric", 30, seed=0)
    ev = Evaluation(small_council(), problems, problems[:20], progress=False)
    with pytest.raises(ValueError, match="overlap"):
        ev.result("routing")


def _problem(i: int, long: bool) -> Problem:
    words = " ".join(["many"] * 30) if long else "few"
    return Problem(id=f"p{i}", question=f"Question {i}: {words}?", answer="1", kind="numeric")


def test_router_learns_who_is_right_where():
    rng = np.random.default_rng(0)
    long = rng.random(200) < 0.5
    problems = [_problem(i, bool(x)) for i, x in enumerate(long)]
    correct = np.stack([~long, long], axis=1).astype(float)  # model "short" right on short questions
    router = LogisticRouter(["short", "long"]).fit(problems[:100], correct[:100])
    choice, margin = route(router.predict(problems[100:]))
    assert np.mean(choice == long[100:].astype(int)) > 0.95
    assert np.all(margin >= 0)
    _, fixed_margin = route(router.predict(problems[100:]), anchor=0)
    assert np.all((fixed_margin < 0) == long[100:])  # the anchor loses the long questions


def test_pareto_frontier_skips_oracles_and_dominated():
    rows = [
        {"protocol": "a", "oracle": False, "accuracy": 0.6, "tokens": 100},
        {"protocol": "b", "oracle": False, "accuracy": 0.7, "tokens": 300},
        {"protocol": "c", "oracle": False, "accuracy": 0.65, "tokens": 400},
        {"protocol": "o", "oracle": True, "accuracy": 0.9, "tokens": 50},
    ]
    assert pareto_frontier(rows, "tokens") == ["a", "b"]


def _args(out: Path, config: Path, protocol: str = "single,debate,comed") -> argparse.Namespace:
    return argparse.Namespace(
        protocol=protocol,
        agents=str(config),
        dataset="synthetic:numeric",
        split="test",
        path=None,
        dev_path=None,
        limit=40,
        out=str(out),
        seed=0,
        overwrite=False,
    )


def _write_config(tmp_path: Path, council: dict) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump(council))
    return path


def test_eval_writes_reports_and_resumes_after_an_interruption(tmp_path):
    council = copy.deepcopy(DEMO_COUNCIL)
    council["comed"]["dev_size"] = 40
    config = _write_config(tmp_path, council)
    out = tmp_path / "run"
    assert main(_args(out, config)) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["protocols"]) == {"single", "debate", "comed"}
    assert (out / "frontier.png").stat().st_size > 0 and (out / "rescue_harm.png").stat().st_size > 0
    assert "rescue" in (out / "report.md").read_text()

    log = out / "episodes" / "debate.jsonl"
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join(lines[:15]) + b"\n" + lines[15][:40])  # killed mid-write
    assert main(_args(out, config)) == 0
    again = json.loads((out / "report.json").read_text())
    for name in ("single", "debate", "comed"):
        assert again["protocols"][name]["accuracy"] == report["protocols"][name]["accuracy"]
        assert again["protocols"][name]["tokens"] == report["protocols"][name]["tokens"]
    assert len(log.read_text().splitlines()) == 40


def test_difficulty_sets_the_level_of_synthetic_test_and_dev_problems():
    """``eval --difficulty`` reaches both problem sets (COMED and the router are fitted at the
    level they are tested at); without it a synthetic set stays at 0.5."""
    from councilzoo.evaluation.harness import _dev_for, problems_for

    council = load_config(copy.deepcopy(DEMO_COUNCIL), CouncilConfig)
    mean = lambda problems: np.mean([p.metadata["difficulty"] for p in problems])  # noqa: E731
    easy = problems_for("synthetic:word_problems", "test", 40, 0, difficulty=0.05)
    easy_dev = _dev_for("synthetic:word_problems", council, 0, difficulty=0.05)()
    default = problems_for("synthetic:word_problems", "test", 40, 0)
    assert mean(easy) < 0.15 and mean(easy_dev) < 0.15
    assert abs(mean(default) - 0.5) < 0.1
    assert not {p.id for p in easy} & {p.id for p in easy_dev}


def test_bad_config_names_the_problem(tmp_path):
    council = copy.deepcopy(DEMO_COUNCIL)
    council["peers"] = ["peer_a", "nobody"]
    with pytest.raises(ConfigError, match="nobody"):
        load_config(council, CouncilConfig)
    council = copy.deepcopy(DEMO_COUNCIL)
    council["models"]["anchor"]["type"] = "not_a_backend"
    with pytest.raises(ConfigError, match="package.module:Class"):
        load_config(council, CouncilConfig)
    with pytest.raises(ValueError, match="unknown"):
        main(_args(tmp_path, _write_config(tmp_path, DEMO_COUNCIL), protocol="comed,telepathy"))


def test_new_agent_guide_example_runs_in_eval(tmp_path, monkeypatch):
    """docs/new_agent.md: the module and config shown there work with `councilzoo eval`."""
    doc = (ROOT / "docs" / "new_agent.md").read_text()
    module = re.search(r"```python\n# my_agents\.py\n(.*?)```", doc, re.S).group(1)
    config = re.search(r"```yaml\n# my_council\.yaml\n(.*?)```", doc, re.S).group(1)
    (tmp_path / "my_agents.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "my_council.yaml"
    path.write_text(config)
    out = tmp_path / "out"
    assert main(_args(out, path, protocol="single,always_verify")) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["protocols"]["single"]["n"] == 40
    sys.modules.pop("my_agents", None)
