"""The cluster tier's SLURM tests (``pytest -m cluster``): scripts/slurm/'s sbatch scripts, submitted
to a real SLURM controller and node daemon on 127.0.0.1 (Debian's slurm-wlm and munge, installed and
started by ``scripts/setup_slurm.sh``, which ``make test-cluster`` runs and the fixture below runs
again if the daemons are down), with CPU worlds (gloo) on the cluster tier's CPU copy of the GPU config.

Debian's slurmd serves one node per host, so a "two-node" job here is two tasks of a one-node job
(``sbatch -N 1 -n 2``): each task is one node's launcher, its machine rank from ``SLURM_PROCID``. What
one host cannot produce, a node list of two real nodes, is checked on ``slurm_env.sh`` with the
environment SLURM would give task 1 of such a job. Where SLURM cannot run, every test skips with the
setup script's exact error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_cluster
import yaml
from test_cluster import GPU_CONFIG, RUN, cpu_config, recipe, trained_rows

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[1]
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


def sbatch(env: dict[str, str], cwd: Path, *args: str, timeout: float = 900) -> tuple[int, str]:
    """Submit, wait for the job to end, and return its id and its output file's text (asserting it
    succeeded)."""
    out = cwd / "job.out"
    done = subprocess.run(
        ["sbatch", "--wait", "--parsable", "--gres=none", f"--output={out}", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    log = out.read_text() if out.is_file() else ""
    assert done.returncode == 0, f"{done.stderr}\n{log[-6000:]}"
    return int(done.stdout.strip().split(";")[0]), log


def port_base(job: int) -> int:
    return 20000 + job % 1000 * 20


def slurm_env(env: dict[str, str], **slurm: str) -> list[str]:
    """What ``slurm_env.sh`` derives in an environment with the given SLURM variables."""
    script = "source scripts/slurm/slurm_env.sh; echo $MACHINE_RANK $MAIN_HOST $MAIN_ADDR $PORT_BASE"
    script += "; cohort_ports 2"
    fake = {k: v for k, v in env.items() if not k.startswith("SLURM_")} | {"SLURM_CONF": env["SLURM_CONF"]}
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, env=fake | slurm, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_slurm_env_of_a_two_node_job(slurm):
    """Task 1 of a two-node job on gpu[07-08] (job 4242): machine rank 1, the label store on the first
    node, the ports of job 4242 (store, then one weight-sync port per member); task 0 gets rank 0."""
    job = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[07-08]"}
    words = slurm_env(slurm, SLURM_PROCID="1", SLURM_NODEID="1", **job)
    assert words[:4] == ["1", "gpu07", "gpu07", str(port_base(4242))]  # an unknown node: its host name
    assert " ".join(words[4:]) == (
        f"--set distributed.host=gpu07 --set distributed.port={port_base(4242)} "
        f"--set members.0.trainer.vllm_group_port={port_base(4242) + 1} "
        f"--set members.1.trainer.vllm_group_port={port_base(4242) + 2}"
    )
    assert slurm_env(slurm, SLURM_PROCID="0", SLURM_NODEID="0", **job)[0] == "0"
    # the next job on the same node gets other ports
    assert slurm_env(slurm, SLURM_PROCID="0", SLURM_JOB_ID="4243", SLURM_JOB_NODELIST="gpu07")[3] == str(
        port_base(4242) + 20
    )


def test_the_two_node_script_keeps_the_recipes_update(slurm):
    """``keep_update`` gives the accumulation of docs/learners.md's two-node recipe for 8 GPUs a node
    (the shipped update on 8 processes), and refuses a world the update does not split over."""
    [(_, command), _] = recipe("Two nodes, one member each")
    documented = int(re.search(r"trainer.gradient_accumulation_steps=(\d+)", command).group(1))
    env = {k: v for k, v in slurm.items() if not k.startswith("SLURM_")} | {"PYTHON": sys.executable}
    env |= {"SLURM_CONF": slurm["SLURM_CONF"], "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu07"}
    script = "source scripts/slurm/slurm_env.sh; keep_update " + GPU_CONFIG
    eight = subprocess.run(["bash", "-c", f"{script} 8"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert eight.returncode == 0 and int(eight.stdout) == documented, eight.stderr
    three = subprocess.run(["bash", "-c", f"{script} 3"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert three.returncode == 1 and "does not split over 3 processes" in three.stderr


def test_two_tasks_of_a_real_job_get_their_ranks_and_the_nodes_address(slurm, tmp_path):
    """Two tasks of one job through srun: ranks 0 and 1, the node's address as SLURM knows it
    (NodeAddr=127.0.0.1), the ports of the job's id."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    task = "source scripts/slurm/slurm_env.sh; echo task $MACHINE_RANK $MAIN_ADDR $PORT_BASE"
    wrap = f"srun --mpi=none bash -c '{task}'"
    job, log = sbatch(slurm, tmp_path, "-N", "1", "-n", "2", "--wrap", wrap)
    lines = sorted(line for line in log.splitlines() if line.startswith("task "))
    assert lines == [f"task {rank} 127.0.0.1 {port_base(job)}" for rank in (0, 1)], log


def _job_env(slurm: dict[str, str], **extra: str) -> dict[str, str]:
    return slurm | {"COUNCILZOO": f"{sys.executable} -m councilzoo.cli", "PYTHON": sys.executable,
                    "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}  # fmt: skip


def test_one_node_sbatch_trains_a_cohort(slurm, tmp_path, models):
    """``sbatch scripts/slurm/corl_one_node.sbatch CONFIG`` trains both members of the cohort (worlds
    of one process here), with the label store on the job's port."""
    cpu_config(tmp_path, models)
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    job, log = sbatch(
        _job_env(slurm), tmp_path, "scripts/slurm/corl_one_node.sbatch", GPU_CONFIG,
        "--set", "members.0.num_processes=1", "--set", "members.1.num_processes=1",
    )  # fmt: skip
    resolved = yaml.safe_load((tmp_path / RUN / "config.yaml").read_text())
    assert resolved["distributed"]["port"] == port_base(job), log
    assert [m["trainer"]["vllm_group_port"] for m in resolved["members"]] == [
        port_base(job) + 1,
        port_base(job) + 2,
    ]
    for name in ("qwen", "llama"):
        assert [r["step"] for r in trained_rows(tmp_path / RUN, name)] == [1], log[-4000:]
        assert (tmp_path / RUN / "members" / name / "final" / "model.safetensors").is_file()


def test_two_node_sbatch_joins_one_cohort(slurm, tmp_path, models):
    """``corl_two_nodes.sbatch`` as two tasks: task r starts member r (``--members r``) as a world of
    GPUS_PER_NODE processes; both join the store of task 0's node and train one step from the same
    exchanged labels."""
    cpu_config(tmp_path, models)
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    job, log = sbatch(
        _job_env(slurm, GPUS_PER_NODE="2"), tmp_path, "-N", "1", "-n", "2", "--ntasks-per-node=2",
        "scripts/slurm/corl_two_nodes.sbatch", GPU_CONFIG,
    )  # fmt: skip
    host = os.uname().nodename.split(".")[0]
    # the CPU copy's update (8 completions a process x its 2 processes x accumulation 4) on 2 processes
    assert f"task 0 on {host}: member 0, store 127.0.0.1:{port_base(job)}, 2 processes, accumulation 4" in log
    rows = {}
    for name in ("qwen", "llama"):
        [row] = trained_rows(tmp_path / RUN, name)
        rows[name] = row
        world = json.loads((tmp_path / RUN / "members" / name / "world.json").read_text())
        assert world["num_processes"] == 2, name
        assert row["votes_per_item"] == 8  # both ranks' completions of an item reached the vote
    assert rows["qwen"]["agreement"] == rows["llama"]["agreement"]  # one exchange of labels
