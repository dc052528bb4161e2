"""Sandbox throughput: programs/s of the worker pool vs a plain one-subprocess-per-program loop.

Subject: ``councilzoo.sandbox.Sandbox`` (one worker per core, each forking one isolated
child per program: a read-only minimal root, rlimits, Landlock, seccomp, its own temporary
folder) grading N programs x M
inputs each: the synthetic:code solutions and distractors, called on their generated inputs.
Baseline, measured in the same run on the same programs: a loop that starts one plain
``python -c harness`` subprocess per program (no isolation beyond the process), sequentially, as a
simple grader does. Both compute the same canonical outputs (checked).

Target: pool/loop >= 4x on 2 cores, from reusing warm interpreters (a fork instead of a Python
start-up) and running across cores. ``overhead_ms_per_program`` is the pool's wall time per
trivial program (``return None``, one input) times the number of workers, i.e. what one program
costs a worker beyond its own work; ``script_overhead_ms_per_program`` the same for a ``script``
job (program plus a one-assertion test run in its own test process, as ``passes()`` grades
HumanEval and MBPP). Worker start-up (paid once per process) is reported apart.
``cpu_ms_per_program`` is the CPU time the workers and everything they ran spent per trivial
program: unlike wall time, it does not grow with the machine's load, so it compares two versions
measured on a busy machine.

Containment: programs that try to outlive the deadline (a busy loop, a sleep, SIGTERM ignored, a
thread spinning after ``setsid`` was refused) run with a 1 s limit; ``wall_clock_over_limit_s`` is
the largest wall time minus the limit, as the caller sees it (target: under 1 s).
Wall time on a shared machine moves with its load, so the load average is written beside the figures.

    python benchmarks/code_sandbox.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from councilzoo.sandbox import Job, Limits, Sandbox, values
from councilzoo.tasks import synthetic_problems

TARGET_RATIO = 4.0
CONTAINMENT_LIMIT_S = 1.0
OUTLIVERS = (
    "while True:\n    pass",
    "import time\ntime.sleep(60)",
    "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass",
    "import os, threading\ntry:\n    os.setsid()\nexcept OSError:\n    pass\n"
    "threading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()\nimport time\ntime.sleep(60)",
)
RESULT = Path(__file__).parent / "results" / "code_sandbox.json"
HARNESS = """
import ast, json, sys
from councilzoo_canonical import canonical
job = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
exec(job["source"], namespace)
fn = namespace[job["entry_point"]]
print(json.dumps([canonical(fn(*ast.literal_eval(a))) for a in job["inputs"]]))
"""


def programs(n: int, m: int) -> list[Job]:
    """``n`` distinct programs (solutions and distractors of synthetic:code), ``m`` inputs each."""
    jobs = []
    for p in synthetic_problems("code", n, seed=0, difficulty=1.0):
        source = [p.metadata["solution"], *p.metadata["distractors"]][len(jobs) % 4]
        inputs = (p.metadata["test_inputs"] * m)[:m]
        jobs.append(Job(source, "call", p.metadata["entry_point"], tuple(inputs)))
    return jobs


def workers_cpu_s(box: Sandbox) -> float:
    """CPU seconds of the pool's processes and of all they reaped (run processes, programs)."""
    total = 0.0
    for pid in box.worker_pids():
        top = psutil.Process(pid)
        for process in [top, *top.children()]:  # in a PID namespace the worker is the child
            t = process.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def plain_loop(jobs: list[Job], limits: Limits) -> tuple[float, list[tuple[str, ...]]]:
    """One fresh interpreter per program, one program at a time."""
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(values.__file__, Path(tmp) / "councilzoo_canonical.py")
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": tmp}
        start = time.perf_counter()
        for job in jobs:
            payload = json.dumps(
                {"source": job.source, "entry_point": job.entry_point, "inputs": list(job.inputs)}
            )
            done = subprocess.run(
                [sys.executable, "-c", HARNESS], input=payload, capture_output=True, text=True,
                timeout=limits.timeout_s, env=env, cwd=tmp,
            )  # fmt: skip
            outputs.append(tuple(json.loads(done.stdout)))
        return time.perf_counter() - start, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer programs")
    quick = parser.parse_args().quick
    n, m = (40, 5) if quick else (200, 10)
    limits = Limits(timeout_s=5.0)
    jobs = programs(n, m)
    load_before = os.getloadavg()

    with Sandbox(limits=limits) as box:
        start = time.perf_counter()
        box.run([Job("pass", "script")])
        startup_s = time.perf_counter() - start
        box.run(jobs[: box.workers * 2])  # warm-up
        start = time.perf_counter()
        results = box.run(jobs)
        pool_s = time.perf_counter() - start
        trivial = [Job("def f():\n    return None\n", "call", "f", ("()",))] * n
        start, cpu_start = time.perf_counter(), workers_cpu_s(box)
        box.run(trivial)
        trivial_s, trivial_cpu_s = time.perf_counter() - start, workers_cpu_s(box) - cpu_start
        scripts = [Job("def f():\n    return None\n", "script", test_script="assert f() is None\n")] * n
        start = time.perf_counter()
        script_results = box.run(scripts)
        script_s = time.perf_counter() - start
        outlived = box.run([Job(src, "script") for src in OUTLIVERS], Limits(timeout_s=CONTAINMENT_LIMIT_S))
        workers, isolation = box.workers, box.isolation
    loop_s, loop_outputs = plain_loop(jobs, limits)

    assert all(r.ok for r in results + script_results), [r for r in results if not r.ok][:3]
    assert all(r.status == "timeout" for r in outlived), outlived
    assert [r.outputs for r in results] == loop_outputs, "the pool and the loop disagree on outputs"
    pool_rate, loop_rate = n / pool_s, n / loop_s
    table = [
        {"runner": f"Sandbox pool ({workers} workers)", "programs": n, "inputs_each": m,
         "wall_s": round(pool_s, 3), "programs_per_s": round(pool_rate, 1)},
        {"runner": "plain subprocess per program", "programs": n, "inputs_each": m,
         "wall_s": round(loop_s, 3), "programs_per_s": round(loop_rate, 1)},
    ]  # fmt: skip
    summary = {
        "ratio": round(pool_rate / loop_rate, 2),
        "target": TARGET_RATIO,
        "target_met": pool_rate / loop_rate >= TARGET_RATIO,
        "overhead_ms_per_program": round(1e3 * trivial_s * workers / n, 2),
        "script_overhead_ms_per_program": round(1e3 * script_s * workers / n, 2),
        "cpu_ms_per_program": round(1e3 * trivial_cpu_s / n, 2),
        "plain_ms_per_program": round(1e3 * loop_s / n, 2),
        "wall_clock_over_limit_s": round(max(r.wall_s for r in outlived) - CONTAINMENT_LIMIT_S, 3),
        "worker_startup_s": round(startup_s, 3),
        "workers": workers,
        "cpu_count": os.cpu_count(),
        "isolation": isolation,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "quick": quick,
    }
    print(f"{'runner':<34} {'programs':>8} {'inputs':>6} {'wall s':>8} {'programs/s':>11}")
    for row in table:
        print(
            f"{row['runner']:<34} {row['programs']:>8} {row['inputs_each']:>6} "
            f"{row['wall_s']:>8.3f} {row['programs_per_s']:>11.1f}"
        )
    verdict = "met" if summary["target_met"] else "NOT met"
    print(f"ratio {summary['ratio']}x (target >= {TARGET_RATIO}x: {verdict})")
    print(
        f"overhead {summary['overhead_ms_per_program']} ms/program per worker vs "
        f"{summary['plain_ms_per_program']} ms plain; {summary['cpu_ms_per_program']} ms CPU/program"
    )
    print(
        f"script jobs {summary['script_overhead_ms_per_program']} ms/program per worker; "
        f"wall clock past a {CONTAINMENT_LIMIT_S} s limit: {summary['wall_clock_over_limit_s']} s at most"
    )
    print(f"load average {summary['loadavg_before']} -> {summary['loadavg_after']}")
    RESULT.parent.mkdir(exist_ok=True)
    RESULT.write_text(json.dumps({"table": table, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
