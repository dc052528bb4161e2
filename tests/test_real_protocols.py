"""The real tier: every evaluation protocol on 4 problems with a council of SmolLM2-135M-Instruct and
Gemma-3-270M seats (the shipped configs/eval_smollm2_gemma.yaml, shortened), through ``councilzoo
eval``. One run of both families serves every test: decoding is most of the tier's cost."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from councilzoo.evaluation.harness import main
from councilzoo.evaluation.protocols import PROTOCOLS
from councilzoo.rollout.log import EpisodeLog

pytestmark = [pytest.mark.real, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = 4
MAX_NEW_TOKENS = 16  # Gemma's "4 + 3 = 7. The answer is 7." fits


@pytest.fixture(scope="module")
def two_family_run(smollm2_dir, gemma_dir, tmp_path_factory) -> Path:
    """``eval --protocol all`` on 4 test problems; short replies, two anchor samples and the smallest
    dev set keep it quick."""
    council = yaml.safe_load((ROOT / "configs" / "eval_smollm2_gemma.yaml").read_text())
    for spec in council["models"].values():
        spec["agent"]["sampling"]["max_new_tokens"] = MAX_NEW_TOKENS
    council.update(samples=2, debate_rounds=1)
    council["comed"]["dev_size"] = 10  # the smallest dev set COMED accepts
    tmp = tmp_path_factory.mktemp("two_family_eval")
    (tmp / "agents.yaml").write_text(yaml.safe_dump(council))
    out = tmp / "run"
    args = argparse.Namespace(protocol="all", agents=str(tmp / "agents.yaml"),
                              dataset="synthetic:word_problems", split="test", path=None, dev_path=None,
                              limit=PROBLEMS, out=str(out), seed=0, overwrite=False)
    assert main(args) == 0
    return out


def test_every_protocol_plays_every_problem_and_rescue_minus_harm_is_the_accuracy_change(two_family_run):
    report = json.loads((two_family_run / "report.json").read_text())
    assert set(report["protocols"]) == set(PROTOCOLS)
    for name, row in report["protocols"].items():
        counts = row["counts"]
        assert row["n"] == PROBLEMS, name
        assert counts["rescue"] - counts["harm"] == counts["accuracy"] - counts["anchor_accuracy"], name
        assert len(row["rescue_ci"]) == 2 and len(row["harm_ci"]) == 2, name


def test_the_real_models_replies_are_recorded_and_costed(two_family_run):
    for name in ("single", "debate", "always_verify"):
        records = list(EpisodeLog(two_family_run / "episodes" / f"{name}.jsonl").load().values())
        assert len(records) == PROBLEMS
        spoken = [t for r in records for t in r.turns if t.text]
        assert spoken, name
        for turn in spoken:  # what each model said, with its own token counts (at most the token cap)
            assert 0 < turn.cost.completion_tokens <= MAX_NEW_TOKENS and turn.cost.prompt_tokens > 20, name
            assert turn.cost.calls >= 1


def test_both_families_speak_in_a_debate(two_family_run):
    """Every debater of both families speaks (Gemma's seats in completion text, SmolLM2's in its
    template)."""
    records = list(EpisodeLog(two_family_run / "episodes" / "debate.jsonl").load().values())
    speakers = {t.agent for r in records for t in r.turns if t.text}
    assert {"peer_0", "peer_1", "peer_2"} <= speakers
