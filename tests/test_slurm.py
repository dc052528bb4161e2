"""The cluster tier's SLURM tests (``pytest -m cluster``): ``scripts/slurm/corl.sbatch``, the one
script of every layout, submitted to a real SLURM controller and node daemon on 127.0.0.1 (Debian's
slurm-wlm and munge, installed and started by ``scripts/setup_slurm.sh``, which ``make test-cluster``
runs and the fixture below runs again if the daemons are down), with CPU worlds (gloo) on the cluster
tier's CPU copy of the GPU config.

The script reads no config and does no arithmetic: ``councilzoo train corl --slurm`` plans the
worlds on the job's allocation (``learners/placement.py``) and starts one ``srun`` step per world.
Node shapes this host cannot give (1 to 8 GPUs a node, several nodes) are planned through the same
script with ``--dry-run`` under the environment SLURM would set. Where SLURM cannot run, the tests
that need it skip with the setup script's exact error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_cluster
from test_cluster import GPU_CONFIG, RUN, cpu_config, trained_rows

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "scripts/slurm/corl.sbatch"
SLURM_DIR = Path(os.environ.get("SLURM_DIR", "/tmp/councilzoo-slurm"))
models = test_cluster.models  # the cluster tier's tiny members (a fixture)


@pytest.fixture(scope="module")
def slurm() -> dict[str, str]:
    """The environment that reaches the test controller (``SLURM_CONF``); skips with setup's error."""
    setup = subprocess.run(["bash", str(ROOT / "scripts" / "setup_slurm.sh")], capture_output=True, text=True)
    if setup.returncode != 0:
        error = SLURM_DIR / "error"
        pytest.skip(
            f"SLURM cannot run here: {error.read_text().strip() if error.is_file() else setup.stderr}"
        )
    return {**os.environ, "SLURM_CONF": str(SLURM_DIR / "slurm.conf")}


def _job_env(base: dict[str, str], **extra: str) -> dict[str, str]:
    return base | {"COUNCILZOO": f"{sys.executable} -m councilzoo.cli", "PYTHONPATH": str(ROOT),
                   "OMP_NUM_THREADS": "1", **extra}  # fmt: skip


def in_a_job(*args: str, cwd: Path = ROOT, **slurm: str) -> subprocess.CompletedProcess:
    """The batch script run as SLURM runs it, in a job with the given SLURM variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "GPUS_PER_NODE"))}
    env = _job_env(env, SLURM_SUBMIT_DIR=str(cwd), **slurm)
    return subprocess.run(["bash", str(ROOT / SCRIPT), *args], cwd=cwd, env=env, capture_output=True,
                          text=True)  # fmt: skip


def test_a_missing_or_malformed_config_or_gpu_count_is_one_line(tmp_path):
    """No traceback from the script: the package reads the config and SLURM's settings."""
    job = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu[01-02]"}
    (tmp_path / "bad.yaml").write_text("members: [\n")
    cases = {"missing.yaml": {}, "bad.yaml": {}, GPU_CONFIG: {"GPUS_PER_NODE": "eight"}}
    for config, extra in cases.items():
        out = in_a_job(config, "--dry-run", cwd=ROOT if config == GPU_CONFIG else tmp_path, **job, **extra)
        assert out.returncode != 0, config
        [line] = out.stderr.strip().splitlines()
        assert line.startswith("councilzoo train: error:") and "Traceback" not in out.stderr, out.stderr
    outside = in_a_job(GPU_CONFIG, "--dry-run")  # no SLURM_JOB_ID: not submitted through sbatch
    assert outside.stderr.strip().splitlines() == [
        "councilzoo train: error: --slurm: not inside a SLURM job (SLURM_JOB_ID or SLURM_JOB_NODELIST is "
        "unset)"
    ]


@pytest.mark.parametrize("gpus, nodes", [(0, 2), (1, 8)])
def test_every_node_shape_plans_the_shipped_config(gpus, nodes):
    """GPUS_PER_NODE 0 (CPU processes, no division by zero) and 1 through the script: each member's
    world of 4 spans as many whole nodes as it needs and keeps the shipped update (128 completions a
    step). tests/test_cohort_placement.py plans 2, 4 and 8 GPUs a node the same way, in-process."""
    out = in_a_job(GPU_CONFIG, "--dry-run", "--set", "data.paraphrases=null", "--set", "members.1.view=0",
                   SLURM_JOB_ID="4242", SLURM_JOB_NODELIST=f"gpu[01-{nodes:02d}]", GPUS_PER_NODE=str(gpus))
    assert out.returncode == 0, out.stderr
    base = 20000 + 4242 % 1000 * 40
    assert f"cohort link at gpu01:{base}" in out.stdout
    blocks = out.stdout.split("\nworld ")[1:]
    assert len(blocks) == 2
    per_node = min(4, gpus) if gpus else 4
    for block in blocks:
        assert f"4 process(es), {per_node} on each of {4 // per_node} node(s)" in block
        assert "= 128 completions an optimizer step" in block


def test_one_sbatch_script_trains_a_cohort_as_srun_steps(slurm, tmp_path, models):
    """``sbatch corl.sbatch CONFIG`` on the one-node test cluster: the plan puts member 0's world of 2
    (torchrun, c10d rendezvous) and member 1's world of 1 on the job's node, each its own srun step;
    both train one step and exchange labels at the job's store port."""
    cpu_config(tmp_path, models)
    out = tmp_path / "job.out"
    done = subprocess.run(
        ["sbatch", "--wait", "--parsable", "--gres=none", f"--output={out}", str(ROOT / SCRIPT), GPU_CONFIG,
         "--set", "members.1.num_processes=1", "--set", "trainer.gradient_accumulation_steps=2"],
        cwd=tmp_path, env=_job_env(slurm, COUNCILZOO_ROOT=str(tmp_path), GPUS_PER_NODE="0"),
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = out.read_text() if out.is_file() else ""
    assert done.returncode == 0, f"{done.stderr}\n{log[-6000:]}"
    job = int(done.stdout.strip().split(";")[0])
    plan = json.loads((tmp_path / RUN / "plan.json").read_text())
    host = plan["worlds"][0]["nodes"][0]["host"]
    assert plan["link"] == f"{host}:{20000 + job % 1000 * 40}"
    assert [w["launcher"] for w in plan["worlds"]] == ["torchrun", "python"]
    rows = {}
    for name, processes in (("qwen", 2), ("llama", 1)):
        [rows[name]] = trained_rows(tmp_path / RUN, name)
        world = json.loads((tmp_path / RUN / "members" / name / "world.json").read_text())
        assert world["num_processes"] == processes, name
        assert rows[name]["votes_per_item"] == 8  # every rank's completions of an item reached the vote
    assert rows["qwen"]["agreement"] == rows["llama"]["agreement"]  # one exchange of labels
    assert "starting 2 member world(s) as srun steps: qwen, llama" in log


def test_the_script_keeps_no_arithmetic_and_no_parser():
    text = (ROOT / SCRIPT).read_text()
    assert "safe_load" not in text and "$((" not in text and "keep_update" not in text
    assert sorted(p.name for p in (ROOT / "scripts" / "slurm").iterdir()) == ["corl.sbatch"]
