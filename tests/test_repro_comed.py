"""`councilzoo repro comed --quick`: the sweep runs, the verdict follows from the numbers."""

from __future__ import annotations

import json

import pytest

from councilzoo.cli import main as cli_main


@pytest.mark.slow
def test_quick_repro_writes_a_consistent_report(tmp_path):
    assert cli_main(["repro", "comed", "--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "comed"
    report = json.loads((out / "report.json").read_text())
    for figure in report["figures"]:
        assert (out / figure).stat().st_size > 0
    checks = report["results"]["checks"]
    assert report["verdict"]["held"] == all(c["held"] for c in checks)
    rows = report["results"]["sweep"]
    levels = sorted({r["swayed_prob"] for r in rows})
    debate = {r["swayed_prob"]: r for r in rows if r["protocol"] == "debate"}
    single = {r["swayed_prob"]: r for r in rows if r["protocol"] == "single"}
    # harm grows with the peers' harm propensity; rescue - harm == accuracy change, per row
    assert debate[levels[-1]]["harm"] > debate[levels[0]]["harm"]
    for r in rows:
        assert abs(r["net"] - (r["rescue"] - r["harm"])) < 1e-9
    cross = report["results"]["dense_loses_to_anchor_from_swayed_prob"]
    if cross is not None:  # interpolated between the grid levels where debate's lead changes sign
        above = min(lv for lv in levels if lv >= cross)
        assert debate[above]["accuracy"] < single[above]["accuracy"]
        assert all(debate[lv]["accuracy"] >= single[lv]["accuracy"] for lv in levels if lv < cross)
    assert "Verdict" in (out / "report.md").read_text()
