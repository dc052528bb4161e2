"""Each recorded verdict pinned to the rule that produced it, and every later reading to its own."""

from __future__ import annotations

import pytest

from councilzoo.repro.recorded import REAL_MODEL_FINALS, RECORDS, real_model_seed_reading
from councilzoo.repro.verdicts import RULES, part_status

# (claim, part's first word(s)) -> verdict under the registered rule, then under each later reading
PINNED = {
    ("Co-RL", "text, in its regime"): ("NOT HELD", ["INCONCLUSIVE"]),
    ("Co-RL", "vlm, code"): ("NOT HELD", ["INCONCLUSIVE"]),
    ("Co-RL", "dose-response"): ("HELD", ["INCONCLUSIVE"]),
    ("Co-RL", "co-training"): ("HELD", []),
    ("COMED", "complementary council with its own"): ("HELD", []),
    ("COMED", "complementary council, 3 seeds"): ("NOT HELD", ["HELD"]),
    ("COMED", "complementary council, 8 seeds"): ("HELD", ["HELD"]),
    ("COMED", "first tiny-LM council"): ("HELD", []),
    ("TRACER", "simulated, 3 seeds"): ("NOT HELD", ["INCONCLUSIVE"]),
    ("TRACER", "simulated, 8 seeds"): ("HELD", []),
    ("TRACER", "utterance layer, 5 seeds"): ("NOT HELD", []),
    ("TRACER", "tiny LMs"): ("HELD", []),
    ("TRACER", "utterance layer, 8 seeds"): ("INCONCLUSIVE", []),
    ("TRACER", "utterance layer with the single-agent GRPO control"): ("INCONCLUSIVE", []),
    ("TRACER", "team optimum"): ("INCONCLUSIVE", []),
}


def _pin(record):
    keys = [k for k in PINNED if k[0] == record.claim and record.part.startswith(k[1])]
    assert len(keys) == 1, (record.claim, record.part)
    return PINNED[keys[0]]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r.claim}: {r.part}")
def test_each_recorded_verdict_follows_from_the_rule_registered_before_its_run(record):
    registered, later = _pin(record)
    assert record.registered in RULES
    assert record.verdict() == registered
    assert [record.verdict(reading) for reading in record.post_hoc] == later
    # a later reading is later than the registered rule, dated, and says why
    assert all(reading.rule > record.registered and reading.reason for reading in record.post_hoc)


def test_every_pinned_verdict_has_its_record():
    assert len(PINNED) == len(RECORDS)


def test_a_check_registered_as_deciding_stays_deciding():
    """COMED's complementary council registered its learned-gate check (5) as deciding on 2026-12-04:
    under that rule the 3-seed run is NOT HELD on it alone, whatever the later relabelling says."""
    record = next(r for r in RECORDS if r.part.startswith("complementary council, 3 seeds"))
    assert record.checks["learned_gates_between_comed_and_oracle"]["status"] == "NOT HELD"
    assert all(
        c["status"] == "HELD"
        for n, c in record.checks.items()
        if n != "learned_gates_between_comed_and_oracle"
    )
    assert record.verdict() == "NOT HELD"


@pytest.mark.parametrize("plan", REAL_MODEL_FINALS)
def test_the_real_models_not_held_becomes_inconclusive_under_seed_intervals(plan):
    """Both recorded plans were NOT HELD by their registered rule (the interval over problems below
    +0.05); over their 3 seeds, Co-RL - TTRL's t interval includes the paper's +1-point edge."""
    status, (mean, lo, hi) = real_model_seed_reading(plan)
    assert status == "INCONCLUSIVE"
    assert mean < 0 and lo < -0.1 and hi > 0.01


def test_the_single_agent_control_is_reported_and_never_decides():
    """Registered 2026-12-07 as ``control`` checks: the utterance part's verdict is its paper checks'
    whatever the control's statuses."""
    record = next(r for r in RECORDS if "single-agent GRPO control" in r.part)
    controls = {n: c for n, c in record.checks.items() if c["kind"] == "control"}
    assert set(controls) == {"grpo_single_first_proposals_raised", "grpo_single_final_accuracy_not_lower"}
    paper = {n: c for n, c in record.checks.items() if c["kind"] == "paper"}
    assert record.verdict() == part_status(paper, record.registered)
