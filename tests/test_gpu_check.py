"""scripts/gpu_check.sh's bundles: each fits a 10-minute slot of a lent GPU, together they cover
every phase, the one to run first is named at the top and first in docs/learners.md's table, and
a bundle runs its own phases only (checked with the cheapest, in the CPU dry run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def bundles() -> dict[str, tuple[list[str], int]]:
    """name -> (phases, sum of their GPU timeouts), in the script's order."""
    out = subprocess.run(["bash", str(SCRIPT), "--list"], capture_output=True, text=True, check=True).stdout
    rows = [re.fullmatch(r"(\w+): ([\w ]+) \((\d+) s\)", line).groups() for line in out.splitlines()]
    return {name: (phases.split(), int(total)) for name, phases, total in rows}


def test_each_bundle_fits_ten_minutes_and_together_they_cover_every_phase():
    found = bundles()
    assert all(total <= 600 for _, total in found.values()), found
    phases = re.findall(r"^phase (\w+) ", SCRIPT.read_text(), re.MULTILINE)
    assert set(phases) == {p for names, _ in found.values() for p in names}
    own_models = {"environment", "learner_step", "stand_ins", "cross_family"}  # phases that build their own
    for names, _ in found.values():  # every bundle builds what its later phases read
        if set(names) - own_models:
            assert names[:3] == ["environment", "models", "config"], names
        if "cross_family" in names:
            assert names == ["environment", "stand_ins", "cross_family"], names


def test_the_bundle_to_run_first_is_named_at_the_top_and_in_the_docs():
    first = next(iter(bundles()))
    assert first == "colocate"  # vLLM colocated: the least proven on a GPU
    assert f"RUN FIRST:  scripts/gpu_check.sh {first}\n" in SCRIPT.read_text()[:400]
    docs = (ROOT / "docs" / "learners.md").read_text()
    table = re.findall(r"^\| `(\w+)`", docs[docs.index("**GPU checks in bundles.**") :], re.MULTILINE)
    assert table[: len(bundles())] == list(bundles())


def test_a_bundle_runs_its_own_phases_only_and_says_why_it_skips(tmp_path):
    """The fsdp bundle in the CPU dry run, without the model phases: environment passes, fsdp and
    multi_gpu are SKIPs with their reasons (not PASSes: before, two_gpus was not exported to the
    phases' shells, so on any machine the 2-GPU phases "passed" without running), and no phase of
    another bundle appears."""
    env = {**os.environ, "GPU_CHECK_CPU": "1", "GPU_CHECK_PHASES": "environment,fsdp,multi_gpu",
           "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}  # fmt: skip
    out = subprocess.run(["bash", str(SCRIPT), "fsdp", str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    summary = out.stdout.split("--- summary ---\n")[1].splitlines()[:-1]
    assert summary[0].startswith("PASS environment (")
    assert summary[1:] == [
        "SKIP models (not in GPU_CHECK_PHASES)", "SKIP config (not in GPU_CHECK_PHASES)",
        "SKIP fsdp: FSDP needs CUDA (on a CPU accelerate would train the world unsharded); GPU machines only",
        "SKIP multi_gpu: needs 2 GPUs (one member's world over both), this machine has 0",
    ]  # fmt: skip
    assert "command not found" not in out.stderr
    unknown = subprocess.run(["bash", str(SCRIPT), "everything"], capture_output=True, text=True)
    assert unknown.returncode == 2 and "run the first first: colocate" in unknown.stderr
