"""The viewer's screenshots in docs/figures/viewer_*.png, taken in headless Chromium.

``DIR`` holds the folders to show (each is skipped when absent):

    councilzoo demo --out DIR/demo
    councilzoo eval --protocol all --agents configs/demo_agents.yaml --dataset synthetic:code \\
        --limit 40 --out DIR/code
    councilzoo eval --protocol single,debate,always_verify --agents configs/demo_agents.yaml \\
        --dataset synthetic:visual --limit 40 --out DIR/visual
    councilzoo train corl configs/corl_cpu.yaml --out DIR/corl --set eval.dataset=synthetic:multiple_choice \\
        --set eval.limit=32 --set eval.eval_steps=4 --set trainer.beta=0.04
    councilzoo train tracer configs/tracer_cpu_simulated.yaml --out DIR/tracer
    councilzoo repro all --quick --out DIR/repro

    python scripts/viewer_screenshots.py DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from councilzoo.viewer import OutputFolder, ViewerServer
from councilzoo.viewer.browser import launch_chromium
from councilzoo.viewer.folder import RESCUED

FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"


def first(folder: OutputFolder, run: str, bit: int, also=lambda episode: True) -> int:
    """The first episode of ``run`` with outcome ``bit`` (and ``also`` true of the full episode)."""
    index = folder.run_names.index(run)
    rows = enumerate(zip(folder.rows["run"], folder.rows["outcome"], strict=True))
    return next(i for i, (r, outcome) in rows if r == index and outcome & bit and also(folder.episode(i)))


def views(folder: OutputFolder, name: str) -> list[tuple[str, str]]:
    """(figure, page address) pairs for the folder ``name``."""
    def episode(run: str, i: int) -> str:
        return f"#episodes?run={folder.run_names.index(run)}&open={i}"

    if name == "demo":
        problem = folder.problem_ids[folder.rows["problem"][first(folder, "debate", RESCUED)]]
        return [("viewer_protocols", "#protocols"),
                ("viewer_episode", episode("always_verify", first(folder, "always_verify", RESCUED))
                 + "&outcome=rescued"),
                ("viewer_problem", f"#problem?id={problem}")]
    if name == "code":  # a rescue where the programs' test results differ
        mixed = first(folder, "debate", RESCUED, lambda ep: len({t["test"] for t in ep["turns"]}) > 1)
        return [("viewer_code", episode("debate", mixed))]
    if name == "visual":
        return [("viewer_images", episode("debate", first(folder, "debate", RESCUED)))]
    if name == "corl":
        return [("viewer_training", "#training")]
    if name == "tracer":
        return [("viewer_tracer", "#training")]
    return [("viewer_report", "#reports?r=1")]


def main(root: Path) -> None:
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for name in ("demo", "code", "visual", "corl", "tracer", "repro"):
            if not (root / name).is_dir():
                continue
            folder = OutputFolder(root / name)
            server = ViewerServer(folder, port=0).start()
            for figure, address in views(folder, name):
                page.goto(server.url + address)
                page.wait_for_load_state("networkidle")
                page.wait_for_timeout(300)  # images decoded, charts drawn
                page.screenshot(path=FIGURES / f"{figure}.png")
                print(FIGURES / f"{figure}.png")
            server.shutdown()
            server.server_close()
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
