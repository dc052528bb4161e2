"""A launch's time before the first step: the placement plan and launcher against starting the world directly.

    python benchmarks/launch_overhead.py [--repeats 3]

Both start a TRACER world of 2 gloo CPU processes (the tiny model, ``num_processes: 2``) and are
timed from the command's start to its "tracer: first step" line (the trainer built on every
rank, the first round about to play), then stopped: ``councilzoo train tracer CONFIG
--overwrite`` (the config read, the plan computed and checked, the output folder checked and
cleared, the run files and ``plan.json`` written, then the world started by the launcher under
torchrun) against the plan's own torchrun command run directly on the ``plan.json`` an earlier run
wrote (what a user could start by hand: every process reads the plan, nothing planned). They
alternate after a warm-up of each; the overhead is the difference of the medians, the ratio the
launcher's median over the direct start's. The load average around the runs is recorded, since
the machine's cores may be shared. Results: ``benchmarks/results/launch_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "launch_overhead.json"
FIRST_STEP = "tracer: first step"


def time_to_first_step(cmd: list[str]) -> float:
    """Seconds from starting ``cmd`` to its first-step line; the command is stopped there."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as p:  # fmt: skip
        for line in p.stdout:
            if FIRST_STEP in line:
                seconds = time.perf_counter() - start
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(60)
                return seconds
    raise SystemExit(f"{cmd} ended (status {p.returncode}) before its first step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from councilzoo.testing import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config = {
            "seed": 3, "max_steps": 2, "output_dir": str(tmp / "run"), "problems_per_step": 4,
            "num_processes": 2, "baselines": ["never_review"], "env": {"lam": 0.01, "rounds": 3},
            "agents": {"kind": "llm", "model": str(build_tiny_model(tmp / "tiny")), "max_new_tokens": 16},
            "generation": {"enabled": True, "num_candidates": 2, "turns_per_step": 4, "minibatches": 1,
                           "peft": None},
            "data": {"synthetic_size": 8, "eval_limit": 2},
        }  # fmt: skip
        (tmp / "tracer.yaml").write_text(yaml.safe_dump(config))
        launcher = [sys.executable, "-m", "councilzoo.cli", "train", "tracer", str(tmp / "tracer.yaml"),
                    "--overwrite"]
        time_to_first_step(launcher)  # warm-up; writes the plan the direct start reads
        plan = json.loads((tmp / "run" / "plan.json").read_text())
        arms = {"plan and launcher": launcher, "direct world start": plan["worlds"][0]["nodes"][0]["command"]}
        time_to_first_step(arms["direct world start"])  # warm-up
        load_before, rows = os.getloadavg()[0], []
        for repeat in range(args.repeats):
            for name, cmd in arms.items():
                seconds = time_to_first_step(cmd)
                rows.append({"start": name, "repeat": repeat, "s_to_first_step": round(seconds, 3)})
                print(rows[-1], flush=True)
    medians = {n: statistics.median(r["s_to_first_step"] for r in rows if r["start"] == n) for n in arms}
    summary = {
        "median_s_launcher": medians["plan and launcher"], "median_s_direct": medians["direct world start"],
        "overhead_s": round(medians["plan and launcher"] - medians["direct world start"], 3),
        "ratio_launcher_over_direct": medians["plan and launcher"] / medians["direct world start"],
        "load_1min_before": round(load_before, 2), "load_1min_after": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }  # fmt: skip
    print(json.dumps(summary))
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps({"table": rows, "summary": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
