"""The shared repro report writer and the `councilzoo repro` dispatcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from councilzoo.repro import run_claim
from councilzoo.repro.report import combine_parts, write_report
from councilzoo.repro.verdicts import HELD, INCONCLUSIVE, NOT_HELD, check


def _result(**overrides) -> dict:
    result = {
        "claim": "A beats B.",
        "setup": {"seeds": 2, "levels": [0.0, 0.5]},
        "results": {
            "table": [{"level": 0.0, "accuracy": 0.75, "ci": [0.7, 0.8]}, {"level": 0.5, "accuracy": 0.5}],
            "crossover": 0.5,
        },
        "verdict": {"held": False, "reason": "A lost at level 0.5."},
        "figures": [],
    }
    return {**result, **overrides}


def test_write_report_renders_tables_and_metadata(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"png")
    paths = write_report(tmp_path, _result(figures=["fig.png"]))
    md = paths["markdown"].read_text()
    assert "**Verdict: NOT HELD.** A lost at level 0.5." in md
    assert "| level | accuracy | ci |" in md and "| 0 | 0.75 | [0.7, 0.8] |" in md
    assert "- crossover: 0.5" in md and "![fig.png](fig.png)" in md
    data = json.loads(paths["json"].read_text())
    assert data["verdict"] == {"status": "NOT HELD", "held": False, "evidence": True,
                               "reason": "A lost at level 0.5."}
    assert "git_revision" in data["run"]
    assert data["run"]["seed"] == 0 and data["run"]["seeds"] == "0 to 1"


def test_a_quick_report_is_a_pipeline_check_stamped_with_its_start(tmp_path):
    result = _result(setup={"seeds": 2, "quick": True})
    paths = write_report(tmp_path, result, started_at="2026-12-07T09:00:00+00:00")
    data = json.loads(paths["json"].read_text())
    assert data["verdict"]["evidence"] is False
    assert data["verdict"]["reason"].startswith("PIPELINE CHECK, NOT EVIDENCE")
    assert result["verdict"]["reason"].startswith("PIPELINE CHECK")  # the line the command prints, too
    assert data["run"]["started_at"] == "2026-12-07T09:00:00+00:00"
    assert "PIPELINE CHECK, NOT EVIDENCE" in paths["markdown"].read_text()


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"verdict": {"held": "yes", "reason": ""}}, "verdict"),
        ({"verdict": {"status": "MAYBE", "reason": ""}}, "verdict"),
        ({"figures": ["missing.png"]}, "missing.png"),
        ({"extra": 1}, "keys"),
    ],
)
def test_write_report_rejects_malformed_results(tmp_path, bad, match):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        write_report(tmp_path, _result(**bad))


def test_unknown_claim_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown claim"):
        run_claim("nope", tmp_path)


def test_negative_jobs_are_refused_before_any_work(tmp_path):
    from councilzoo.cli import main as cli_main

    assert cli_main(["repro", "all", "--jobs", "-1", "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())


def test_an_inconclusive_verdict_is_written_as_such(tmp_path):
    paths = write_report(tmp_path, _result(verdict={"status": INCONCLUSIVE, "reason": "CI spans 0."}))
    assert "**Verdict: INCONCLUSIVE.** CI spans 0." in paths["markdown"].read_text()
    assert json.loads(paths["json"].read_text())["verdict"]["held"] is False


def test_combine_parts_decides_by_the_papers_checks_only():
    def part(**checks):
        return {"setup": {}, "results": {}, "reason": "r", "figures": [], "checks": checks}

    parts = {
        "a": part(claim=check("paper", HELD, "gain above 0", [0.1, 0.05, 0.15]),
                  gate=check("extension", NOT_HELD, "learned gate beats COMED", 0.0)),
        "b": part(band=check("precondition", HELD, "in band", 0.6),
                  claim=check("paper", HELD, "gain above 0", [0.1, 0.02, 0.2])),
    }
    result = combine_parts("A beats B.", parts, {})
    assert result["verdict"]["status"] == HELD  # the failed extension check does not decide
    rows = {(r["part"], r["check"]): r for r in result["results"]["checks"]}
    assert rows[("a", "gate")]["kind"] == "extension" and rows[("a", "claim")]["ci"] == (0.05, 0.15)
    parts["b"]["checks"]["band"] = check("precondition", NOT_HELD, "in band", 0.544)
    result = combine_parts("A beats B.", parts, {})
    assert [p["status"] for p in result["results"]["parts"]] == [HELD, INCONCLUSIVE]
    assert result["verdict"]["status"] == INCONCLUSIVE  # a failed precondition never reads NOT HELD
    parts["a"]["checks"]["claim"] = check("paper", NOT_HELD, "gain above 0", [-0.1, -0.2, -0.05])
    assert combine_parts("A beats B.", parts, {})["verdict"]["status"] == NOT_HELD
    legacy = {"setup": {}, "results": {}, "reason": "r", "figures": [], "held": True}
    assert combine_parts("A.", {"x": legacy}, {})["verdict"]["status"] == HELD


def test_compare_reports_ignores_run_metadata_and_wall_clock_but_finds_a_changed_number(tmp_path, capsys):
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "scripts" / "compare_reports.py"
    spec = importlib.util.spec_from_file_location("compare_reports", script)
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    results = {"gain": 0.1, "ci": [float("nan"), 0.2], "training_seconds": 5.0}
    for name, run, seconds, gain in (("a", "t0", 5.0, 0.1), ("b", "t1", 9.0, 0.1), ("c", "t0", 5.0, 0.3)):
        (tmp_path / name / "corl").mkdir(parents=True)
        changed = {"run": {"started_at": run},
                   "results": {**results, "training_seconds": seconds, "gain": gain}}
        (tmp_path / name / "corl" / "report.json").write_text(json.dumps(changed))
    assert compare.main([str(tmp_path / "a"), str(tmp_path / "b"), "--claims", "corl"]) == 0
    assert compare.main([str(tmp_path / "a"), str(tmp_path / "c"), "--claims", "corl"]) == 1
    assert "/results/gain: 0.1 != 0.3" in capsys.readouterr().out
