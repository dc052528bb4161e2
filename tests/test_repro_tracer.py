"""``councilzoo repro tracer --quick``: result shape, figures, and a verdict derived from numbers."""

from __future__ import annotations

import pytest

from councilzoo.repro import run_claim


@pytest.mark.slow
def test_quick_repro_writes_report_figures_and_a_computed_verdict(tmp_path):
    result = run_claim("tracer", tmp_path, seeds=2, quick=True)
    out = tmp_path / "tracer"
    assert (out / "report.md").is_file() and (out / "report.json").is_file()
    assert all((out / f).is_file() and (out / f).stat().st_size > 1000 for f in result["figures"])
    res = result["results"]
    assert res["all_states_within_bound"] and res["max_regret_over_bound"] <= 1.0
    rows = res["protocols"]
    assert {r["protocol"] for r in rows} == {"tracer", "always_speak", "never_review"}
    assert all(len(r["objective_ci"]) == 2 for r in rows)
    expected = (res["all_states_within_bound"] and bool(res["levels_where_speaking_helps"])
                and all(res["learns_where_speaking_helps"].values())
                and min(res["mean_gap_to_best_fixed"].values()) > -0.02)
    assert result["verdict"]["held"] == expected
