"""The cluster tier across two hosts: two network namespaces on this machine (``scripts/setup_two_hosts.sh``),
each with its own network stack, address (10.48.0.1, 10.48.0.2), loopback and host name (``hosta``,
``hostb``: a UTS namespace a launcher), joined by a veth pair. Each host runs the same command,
``councilzoo train corl CONFIG --hosts hostb,hosta`` (one launcher a host, started directly: Debian's
slurmd serves one node per host, so the SLURM tests run on one), in one folder both see (the shared
filesystem of a cluster). Each computes the same placement plan and starts its part: member 0 is one
torchrun world over both hosts (c10d rendezvous at hosta, gloo between the namespaces), member 1 a
one-process world on hostb whose labels travel to the cohort link's store on hosta.
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
ERROR = Path(os.environ.get("TWO_HOSTS_DIR", "/tmp/councilzoo-two-hosts")) / "error"
models = test_cluster.models  # the cluster tier's tiny members (a fixture)


@pytest.fixture(scope="module")
def two_hosts() -> None:
    setup = subprocess.run(["bash", str(ROOT / "scripts" / "setup_two_hosts.sh")], capture_output=True,
                           text=True)  # fmt: skip
    if setup.returncode != 0:
        reason = ERROR.read_text().strip() if ERROR.is_file() else setup.stderr
        pytest.skip(f"two hosts cannot be set up here: {reason}")


def on_host(host: str, cwd: Path, *argv: str) -> subprocess.Popen:
    """``argv`` on ``host``: in its network namespace, under its own host name."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = ["ip", "netns", "exec", f"cz-{host}", "unshare", "--uts", "bash", "-c",
               f'hostname {host} && exec "$@"', host, *argv]  # fmt: skip
    log = open(cwd / f"{host}.log", "w")  # noqa: SIM115 - closed by the caller's wait
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=log)


def test_a_cohort_across_two_hosts_with_a_world_spanning_both(two_hosts, tmp_path, models):
    cpu_config(tmp_path, models, prompts_per_step=8)
    sets = ["members.0.nodes=2", "members.0.num_processes=1", "members.1.num_processes=1"]
    argv = [sys.executable, "-m", "councilzoo.cli", "train", "corl", GPU_CONFIG, "--hosts", "hostb,hosta",
            *(a for s in sets for a in ("--set", s))]  # fmt: skip
    launchers = {host: on_host(host, tmp_path, *argv) for host in ("hosta", "hostb")}
    for host, proc in launchers.items():
        assert proc.wait(timeout=900) == 0, (tmp_path / f"{host}.log").read_text()[-4000:]
    plan = json.loads((tmp_path / RUN / "plan.json").read_text())
    assert [[n["host"] for n in w["nodes"]] for w in plan["worlds"]] == [["hosta", "hostb"], ["hostb"]]
    assert plan["link"].startswith("hosta:") and plan["worlds"][0]["rendezvous"].startswith("hosta:")
    rows = {}
    for name, processes in (("qwen", 2), ("llama", 1)):
        [rows[name]] = trained_rows(tmp_path / RUN, name)
        world = json.loads((tmp_path / RUN / "members" / name / "world.json").read_text())
        assert world["num_processes"] == processes, name
        assert rows[name]["votes_per_item"] == 8  # both hosts' completions of an item reached the vote
    assert rows["qwen"]["agreement"] == rows["llama"]["agreement"]  # one exchange through hosta's store
    hostb = (tmp_path / "hostb.log").read_text()
    assert "starting 2 member world(s): qwen on hostb, llama on hostb" in hostb
