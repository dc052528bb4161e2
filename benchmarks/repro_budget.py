"""`councilzoo repro all` against its time budgets: wall seconds and CPU seconds.

Subject: `councilzoo repro all [--quick] --jobs 2` in a child process, into a fresh output
folder. Baseline: the budget (600 s for the full run, 120 s for `--quick`, on 2 idle cores), so
the summary's ratio is wall / budget (under 1 meets it). CPU seconds are the child's and all its
waited-for descendants' user + system time (`resource.RUSAGE_CHILDREN`: the claims' process pools
and the member worlds they start), the figure that stays meaningful on a shared machine, where
wall time depends on the load; the load average at start and end is recorded beside it.

    python benchmarks/repro_budget.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET = {"full": 600.0, "quick": 120.0}


def measure(quick: bool, out: Path) -> dict:
    """Run the command once; its wall and CPU seconds and the load around it."""
    command = [sys.executable, "-m", "councilzoo.cli", "repro", "all", "--jobs", "2", "--out", str(out)]
    command += ["--quick"] if quick else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_start, start = os.getloadavg()[0], time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": " ".join(command[1:]), "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "load_at_start": load_start, "load_at_end": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="measure `repro all --quick` (budget 120 s)")
    parser.add_argument("--out", default=None, help="output folder of the run (default: a temporary one)")
    args = parser.parse_args()
    kind = "quick" if args.quick else "full"
    with tempfile.TemporaryDirectory(prefix="repro-budget-") as tmp:
        row = measure(args.quick, Path(args.out or tmp) / "repro")
    row["budget_seconds"] = BUDGET[kind]
    summary = {"kind": kind, "wall_over_budget": round(row["wall_seconds"] / BUDGET[kind], 3),
               "cpu_seconds": row["cpu_seconds"], "cpu_over_two_core_budget": round(
                   row["cpu_seconds"] / (2 * BUDGET[kind]), 3)}
    print(f"| run | wall s | CPU s | budget s | load start/end |\n|---|---|---|---|---|\n"
          f"| {kind} | {row['wall_seconds']} | {row['cpu_seconds']} | {BUDGET[kind]:g} | "
          f"{row['load_at_start']:.1f} / {row['load_at_end']:.1f} |")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    table = {"table": [row], "summary": summary}
    (results / f"repro_budget_{kind}.json").write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
