"""``councilzoo view`` on a 10,000-episode folder: seconds until the page has rendered its list.

Subject: the time from starting the viewer on the folder (``OutputFolder``: reading every
episode log into the index) until headless Chromium shows the first page of the episode list
(``#episodes``; the index fetched, parsed and filtered, 100 rows drawn), and the time a filter
takes to narrow the list. The folder is real: ``councilzoo eval --protocol all`` with the
demo's simulated agents on enough synthetic problems for 10,000 episodes.

Baselines, measured in the same run: ``json.loads`` of every line of the same episode logs (what
any reader of the records pays at least), and the same viewer on a 100-episode folder.
Goal: under 2 s for 10,000 episodes. Needs /usr/bin/chromium (``make browser``) and playwright.

    python benchmarks/viewer_load.py [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from councilzoo.cli import main as cli_main
from councilzoo.viewer import OutputFolder, ViewerServer
from councilzoo.viewer.browser import launch_chromium

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "viewer_load.json"
GOAL_S = 2.0
# eval --protocol all plays 11 runs on the test problems and 7 on 300 dev problems:
# 11 * 730 + 7 * 300 = 10,130 episodes.
LARGE_LIMIT, SMALL_LIMIT = 730, 50


def build(out: Path, protocols: str, limit: int) -> None:
    args = ["eval", "--protocol", protocols, "--agents", str(REPO / "configs" / "demo_agents.yaml"),
            "--dataset", "synthetic:numeric", "--limit", str(limit), "--out", str(out)]
    assert cli_main(args) == 0, f"eval failed: {args}"


def parse_every_line(out: Path) -> float:
    start = time.perf_counter()
    for log in sorted((out / "episodes").glob("*.jsonl")):
        with open(log, "rb") as file:
            for line in file:
                json.loads(line)
    return time.perf_counter() - start


def time_to_list(browser, out: Path) -> dict:
    """Seconds from indexing ``out`` to the rendered list (the browser tab is open already, as a
    user's would be), and for one filter to narrow it."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    start = time.perf_counter()
    folder = OutputFolder(out)
    server = ViewerServer(folder, port=0).start()
    indexed = time.perf_counter()
    try:
        page.goto(server.url + "#episodes")
        page.wait_for_selector("table.episodes tbody tr")
        listed = time.perf_counter()
        before = page.inner_text("#match-count")
        page.select_option("#f-outcome", "rescued")
        page.wait_for_function(f"document.querySelector('#match-count').textContent !== {json.dumps(before)}")
        filtered = time.perf_counter()
        rows = page.locator("table.episodes tbody tr").count()
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    return {"episodes": len(folder.locations), "index_s": indexed - start, "page_s": listed - indexed,
            "time_to_list_s": listed - start, "filter_s": filtered - listed, "rows_drawn_after_filter": rows}


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed openings per folder (median reported)")
    parser.add_argument("--keep", default=None, help="build the folders here and keep them (default: temp)")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="viewer_load_"))
    large, small = root / "large", root / "small"
    if not (large / "report.json").exists():
        build(large, "all", LARGE_LIMIT)
    if not (small / "report.json").exists():
        build(small, "single,debate", SMALL_LIMIT)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        time_to_list(browser, small)  # warm-up: the browser's first page and Python's first index
        large_runs = [time_to_list(browser, large) for _ in range(args.repeats)]
        small_runs = [time_to_list(browser, small) for _ in range(args.repeats)]
        browser.close()
    parse_s = statistics.median(parse_every_line(large) for _ in range(args.repeats))
    big, little = median_of(large_runs), median_of(small_runs)
    size_mb = sum(p.stat().st_size for p in (large / "episodes").glob("*.jsonl")) / 1e6
    summary = {
        "episodes": int(big["episodes"]), "episode_logs_mb": round(size_mb, 1),
        "time_to_list_s": round(big["time_to_list_s"], 3), "index_s": round(big["index_s"], 3),
        "page_s": round(big["page_s"], 3), "filter_s": round(big["filter_s"], 3),
        "baseline_json_parse_s": round(parse_s, 3),
        "ratio_to_json_parse": round(big["time_to_list_s"] / parse_s, 2),
        "baseline_small_folder_episodes": int(little["episodes"]),
        "baseline_small_folder_s": round(little["time_to_list_s"], 3),
        "ratio_to_small_folder": round(big["time_to_list_s"] / little["time_to_list_s"], 2),
        "goal_s": GOAL_S, "meets_goal": big["time_to_list_s"] < GOAL_S,
        "cpu_count": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(summary, indent=1))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeats": args.repeats, "large": large_runs, "small": small_runs,
                                   "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
