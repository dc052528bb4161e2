"""The shared repro report writer and the `councilzoo repro` dispatcher."""

from __future__ import annotations

import json

import pytest

from councilzoo.repro import run_claim
from councilzoo.repro.report import write_report


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
    assert data["verdict"] == {"held": False, "reason": "A lost at level 0.5."}
    assert "git_revision" in data["run"]


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"verdict": {"held": "yes", "reason": ""}}, "verdict"),
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
