"""`councilzoo repro all` against its time budgets: wall seconds and CPU seconds.

Subject: `councilzoo repro all [--quick] --jobs 2` in a child process, into a fresh output
folder. Baseline: the budget (600 s for the full run, 120 s for `--quick`, on 2 idle cores), so
the summary's ratio is wall / budget (under 1 meets it). CPU seconds are those of the child and
every descendant, the figure that stays meaningful on a shared machine, where wall time depends
on the load (the load average at start and end is recorded beside it): read from a cgroup-v1
`cpuacct` group made for the run (`/sys/fs/cgroup/cpuacct`, needs root), which counts the
warm-started member worlds too; without one, `resource.RUSAGE_CHILDREN`, which misses descendants
no process waited for (measured: `repro corl --quick` 28 CPU s by rusage, far under its real
cost), and the row says which (`cpu_source`).

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


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _cpuacct_group() -> Path | None:
    """A fresh cpuacct group for the run, or None where cgroup v1 cpuacct is not writable."""
    group = CPUACCT / f"councilzoo-repro-budget-{os.getpid()}"
    try:
        group.mkdir()
    except OSError:
        return None
    return group


def measure(quick: bool, out: Path) -> dict:
    """Run the command once; its wall and CPU seconds and the load around it."""
    command = [sys.executable, "-m", "councilzoo.cli", "repro", "all", "--jobs", "2", "--out", str(out)]
    command += ["--quick"] if quick else []
    group = _cpuacct_group()

    def join_group() -> None:  # in the child, before exec: it and every descendant are counted
        (group / "cgroup.procs").write_text(str(os.getpid()))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_start, start = os.getloadavg()[0], time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                   preexec_fn=join_group if group else None)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if group is not None:
        cpu, source = int((group / "cpuacct.usage").read_text()) / 1e9, "cpuacct cgroup"
        for _ in range(60):  # the last member worlds may still be exiting: the group empties then
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.5)
    else:
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        source = "rusage children (misses descendants no process waited for)"
    return {"command": " ".join(command[1:]), "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "cpu_source": source, "load_at_start": load_start, "load_at_end": os.getloadavg()[0]}


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
