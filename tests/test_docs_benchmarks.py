"""docs/benchmarks.md is generated from benchmarks/results/*.json (benchmarks/report.py), so no measured
figure is typed twice: the page must equal what the JSON gives, and show the JSON's figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("benchmarks_report", ROOT / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)


def test_benchmarks_page_is_what_the_results_give():
    assert report.main(["--check"]) == 0, "docs/benchmarks.md is out of date: run python benchmarks/report.py"


def test_every_result_file_has_a_section_naming_its_script():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        section = page.split(f"\n## {path.stem}\n", 1)[1].split("\n## ", 1)[0]
        assert f"`benchmarks/{report.script_for(path.name).name}`" in section, path.name


def test_a_changed_figure_shows_on_the_page(tmp_path, monkeypatch):
    """The page follows the JSON: a new figure in a result file appears in its table, to 4 digits."""
    results = tmp_path / "results"
    results.mkdir()
    source = json.loads((ROOT / "benchmarks" / "results" / "code_sandbox.json").read_text())
    source["table"][0]["programs_per_s"] = 123.456789
    (results / "code_sandbox.json").write_text(json.dumps(source))
    monkeypatch.setattr(report, "RESULTS", results)
    page = report.render()
    row = source["table"][0]
    shown = f"| {row['runner']} | {row['programs']} | {row['inputs_each']} | {row['wall_s']:.4g} | 123.5 |"
    assert shown in page
    assert f"- `summary.ratio`: {source['summary']['ratio']:.4g}" in page
