"""A cohort launch's time before its first step: the placement plan against the launcher it replaced:

    python benchmarks/placement_overhead.py [--baseline-commit 41b6177] [--repeats 2]

Both start ``councilzoo train corl configs/corl_cpu.yaml --max-steps 1`` (two tiny members, one
process world each) from the same shell, one after the other, alternating: the baseline is the
package at ``--baseline-commit`` (``git archive`` into a temporary folder; its launcher checks each
member's settings, then each member re-reads the YAML, looks its learner up and rebuilds its
``GRPOConfig``), the other this tree (the launcher plans once, writes ``plan.json``, each member
reads it). The time is from the command's start to the last member's "first step" line (models
cached by a warm-up run of each first); the ratio is the plan's median over the baseline's. Prints
a table and writes the result as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "placement_overhead.json"


def time_to_first_step(code: Path, out: Path) -> float:
    """Seconds from starting the command to its second member's "first step" line."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "councilzoo.cli", "train", "corl", str(ROOT / "configs" / "corl_cpu.yaml"),
           "--max-steps", "1", "--out", str(out), "--overwrite"]  # fmt: skip
    start, seen = time.perf_counter(), None
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    with subprocess.Popen(cmd, cwd=code, env=env, **pipe) as p:
        firsts = 0
        for line in p.stdout:
            if "first step (generation, rewards, update)" in line:
                firsts += 1
                if firsts == 2:
                    seen = time.perf_counter() - start
        if p.wait() != 0 or seen is None:
            raise SystemExit(f"{cmd} failed (code {code})")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline-commit", default="41b6177")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--output", type=Path, default=RESULT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline_commit], cwd=ROOT, capture_output=True,
                                 check=True)  # fmt: skip
        (Path(tmp) / "base.tar").write_bytes(archive.stdout)
        with tarfile.open(Path(tmp) / "base.tar") as tar:
            tar.extractall(base, filter="data")
        codes = {"baseline launcher": base, "placement plan": ROOT}
        for code in codes.values():  # warm-up: models built and cached, files in the page cache
            time_to_first_step(code, Path(tmp) / "warm")
        rows = []
        for repeat in range(args.repeats):
            for name, code in codes.items():
                seconds = time_to_first_step(code, Path(tmp) / f"{repeat}")
                rows.append({"launcher": name, "repeat": repeat, "s_to_first_step": seconds})
                print(rows[-1], flush=True)
    medians = {n: statistics.median(r["s_to_first_step"] for r in rows if r["launcher"] == n) for n in codes}
    result = {
        "baseline_commit": args.baseline_commit,
        "median_s_baseline": medians["baseline launcher"],
        "median_s_plan": medians["placement plan"],
        "ratio_plan_over_baseline": medians["placement plan"] / medians["baseline launcher"],
        "load_average_1min_at_end": os.getloadavg()[0],
        "runs": rows,
    }
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
