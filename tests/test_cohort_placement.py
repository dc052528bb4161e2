"""Where a cohort runs (devices, processes, machines, ports) versus what it learns: the placement
plan (``learners/placement.py``) on one node, on named hosts and on SLURM allocations of every node
shape, its checks at each member's real world size, the config fingerprint, how a world is started,
and the plans docs/learners.md prints for its layouts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from councilzoo.config import ConfigError, load_config
from councilzoo.learners.corl import CoRLConfig
from councilzoo.learners.placement import Machines, Placement, expand_hostlist, plan_cohort

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, **changes) -> CoRLConfig:
    data = yaml.safe_load((ROOT / "configs" / "corl_gpu_qwen_llama.yaml").read_text())
    for member, family in zip(data["members"], ("qwen3", "llama"), strict=True):
        del member["model"], member["accelerate_config"]
        member["tiny_family"] = family
    data["output_dir"] = str(tmp_path / "run")
    data.update(changes)
    return load_config(data, CoRLConfig)


def test_batch_settings_are_checked_at_the_members_world_size(tmp_path):
    cfg = _config(tmp_path)
    cfg.members[0].num_processes = 3
    with pytest.raises(ConfigError) as err:
        cfg.member_args(0, world_size=cfg.members[0].world_size())
    assert str(err.value) == (
        "members.0 (qwen): generation_batch_size 512 (prompts_per_step 64 x num_generations 8) is not "
        "divisible by the global batch 24 (per_device_train_batch_size 8 x 3 processes); use num_processes 2 "
        "or prompts_per_step 60"
    )
    cfg.members[0].num_processes = 8
    cfg.trainer = {**cfg.trainer, "gradient_accumulation_steps": 16}  # one update per 512-completion round
    wrong = "makes 8 micro-steps .* gradient_accumulation_steps=16 does not divide; "
    wrong += "use per_device_train_batch_size 4 "
    with pytest.raises(ConfigError, match=wrong + "or num_processes 4 or gradient_accumulation_steps 8"):
        cfg.member_args(0, world_size=8)
    cfg.member_args(0, world_size=1)  # the same settings pass at world size 1, where TRL checks them
    for fix in ({"prompts_per_step": 60}, {"trainer": {**cfg.trainer, "gradient_accumulation_steps": 8}}):
        fixed = _config(tmp_path, **fix)
        fixed.member_args(0, world_size=3 if "prompts_per_step" in fix else 8)  # the suggestion works


def test_the_fingerprint_ignores_placement_but_not_training(tmp_path):
    base = _config(tmp_path).fingerprint()
    placed = _config(tmp_path / "elsewhere", distributed={"host": "10.0.0.1", "port": 1234})
    placed.members[0].devices, placed.members[0].num_processes = "0,1,2,3,4,5,6,7", 8
    placed.members[1].trainer = {"vllm_server_base_url": "http://127.0.0.1:8001", "vllm_group_port": 5}
    assert placed.fingerprint() == base
    changed = _config(tmp_path)
    changed.members[1].trainer = {"learning_rate": 2e-6}
    assert changed.fingerprint() != base


def test_each_member_gets_its_own_vllm_group_port_unless_set(tmp_path):
    cfg = _config(tmp_path)
    assert [cfg.member_args(i, world_size=4).vllm_group_port for i in range(2)] == [51216, 51217]
    cfg.members[1].trainer = {"vllm_group_port": 60000}
    assert cfg.member_args(1, world_size=4).vllm_group_port == 60000


def _plan(cfg: CoRLConfig, hosts: str, gpus: int) -> Placement:
    return plan_cohort(cfg, "councilzoo.learners.corl.learner:CoRL", Machines.listed(hosts, gpus))


def test_slurm_host_lists_and_gpus_per_node_are_read_once_or_refused_in_one_line():
    assert expand_hostlist("gpu[07-08,10],login1") == ["gpu07", "gpu08", "gpu10", "login1"]
    job = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[07-08]"}
    machines = Machines.slurm({**job, "SLURM_GPUS_PER_NODE": "a100:8"})
    assert (machines.hosts, machines.gpus_per_host, machines.slurm_job) == (("gpu07", "gpu08"), 8, 4242)
    assert Machines.slurm({**job, "GPUS_PER_NODE": "0"}).gpus_per_host == 0  # CPU processes, no division
    with pytest.raises(ConfigError, match=r"^GPUS_PER_NODE='x': expected a number of GPUs a node"):
        Machines.slurm({**job, "GPUS_PER_NODE": "x"})
    with pytest.raises(ConfigError, match="not inside a SLURM job"):
        Machines.slurm({})


def test_the_train_flags_name_the_machines_or_leave_them_to_the_launcher(monkeypatch):
    assert Machines.from_flags(False, None, 0) is None  # this machine: the launcher plans on Machines.here()
    assert Machines.from_flags(False, "gpu[01-02]", 8) == Machines.listed("gpu[01-02]", 8)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[01-02]")
    monkeypatch.setenv("GPUS_PER_NODE", "4")
    assert Machines.from_flags(True, None, 0) == Machines.slurm()
    with pytest.raises(ConfigError, match=r"^--slurm and --hosts: give one"):
        Machines.from_flags(True, "gpu01", 8)


def test_one_node_keeps_the_members_apart_and_every_node_shape_keeps_the_update(tmp_path):
    """The shipped config's two worlds of 4: on one 8-GPU node, devices 0-3 and 4-7; on nodes of
    4, 2 or 1 GPU(s) each world spans whole nodes with the same 4 processes, so every shape trains
    the shipped update (8 a process x 4 x accumulation 4 = 128 completions a step); on CPUs
    (GPUS_PER_NODE=0) each world is 4 processes on a node of its own."""
    cfg = _config(tmp_path)
    one = _plan(cfg, "n1", 8)
    assert [[(n.host, n.devices) for n in w.nodes] for w in one.worlds] == [[("n1", "0,1,2,3")],
                                                                           [("n1", "4,5,6,7")]]
    for gpus in (4, 2, 1):
        plan = _plan(cfg, "n[1-8]", gpus)
        assert [len(w.nodes) for w in plan.worlds] == [4 // gpus] * 2
        assert len(plan.hosts()) == 8 // gpus  # no node serves two worlds' GPUs twice
        assert [w.completions_per_step() for w in plan.worlds] == [128, 128]
        assert {n.devices for w in plan.worlds for n in w.nodes} == {",".join(map(str, range(gpus)))}
    cpu = _plan(cfg, "n[1-2]", 0)
    assert [[(n.host, n.devices) for n in w.nodes] for w in cpu.worlds] == [[("n1", None)], [("n2", None)]]
    assert all(w.members[0].grpo["use_cpu"] for w in cpu.worlds)
    assert not any("use_cpu" in w.members[0].grpo for w in one.worlds)
    with pytest.raises(ConfigError, match=r"^members.1 \(llama\): needs 4 node\(s\) with 1 free GPU"):
        _plan(cfg, "n[1-6]", 1)
    with pytest.raises(ConfigError, match="a world of 4 processes does not fill whole nodes of 3 GPU"):
        _plan(cfg, "n[1-6]", 3)


def test_a_world_across_nodes_meets_at_one_rendezvous(tmp_path):
    """torchrun's c10d rendezvous: every node of a world meets at its first node, named by its own
    address (the rendezvous ranks nodes by it); an accelerate world gets its machines, address and
    each node's rank from the plan (no edited config file)."""
    cfg = _config(tmp_path)
    cfg.members[0].num_processes = 16
    cfg.members[0].trainer = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2}
    plan = _plan(cfg, "gpu[01-03]", 8)
    spanning = plan.worlds[0]
    assert [n.host for n in spanning.nodes] == ["gpu01", "gpu02"] and spanning.rendezvous == "gpu01:29518"
    assert [n.command[n.command.index("--local-addr") + 1] for n in spanning.nodes] == ["gpu01", "gpu02"]
    assert spanning.nodes[0].command[spanning.nodes[0].command.index("--nnodes") + 1] == "2"
    assert [n.host for n in plan.worlds[1].nodes] == ["gpu03"] and plan.link == "gpu01:29517"
    assert spanning.completions_per_step() == 128
    cfg.members[0].accelerate_config = str(ROOT / "configs" / "accelerate" / "zero3.yaml")
    accelerate = _plan(cfg, "gpu[01-03]", 8).worlds[0]
    ranks = [n.command[n.command.index("--machine_rank") + 1] for n in accelerate.nodes]
    assert ranks == ["0", "1"]
    assert {n.command[n.command.index("--main_process_ip") + 1] for n in accelerate.nodes} == {"gpu01"}


def test_the_member_builds_its_arguments_from_the_plan_alone(tmp_path):
    """plan.json round-trips, and GRPOConfig(**grpo) of a world's member is the member's GRPOConfig at
    its world size."""
    from councilzoo.learners.engine import grpo_config

    cfg = _config(tmp_path)
    plan = plan_cohort(cfg, "councilzoo.learners.corl.learner:CoRL", Machines.here())
    read = Placement.read(plan.write(tmp_path / "out"))
    assert read == plan
    for i, world in enumerate(read.worlds):
        [member] = world.members
        assert member.index == i
        args, expected = grpo_config(member.grpo, member.name), cfg.member_args(i, world_size=world.processes)
        assert args.to_dict() == expected.to_dict()
        assert world.nodes[0].command[-3:] == [str(tmp_path / "run" / "plan.json"), "--world", str(i)]
    assert read.config["distributed"]["host"] == "127.0.0.1" and read.fingerprint == cfg.fingerprint()


LAYOUTS = {
    "2 members on 8 GPUs of one node": ("configs/corl_gpu_qwen_llama.yaml", "gpu01", []),
    "4 members of different sizes on 4 nodes": ("configs/corl_gpu_cluster.yaml", "gpu[01-04]", []),
    "1 member across 2 nodes beside one-node members": (
        "configs/corl_gpu_cluster.yaml", "gpu[01-04]",
        ["members.0.num_processes=16", "members.0.trainer.per_device_train_batch_size=4"],
    ),
    "a shared_base group beside a member": ("configs/corl_shared_base_cpu.yaml", "gpu01", []),
}


def layout_plan(config: str, hosts: str, sets: list[str]) -> str:
    """What ``councilzoo train corl CONFIG --dry-run --hosts HOSTS --gpus-per-host 8 --set ...`` prints
    of its placement, run in the repository root, with the interpreter written ``python``."""
    from councilzoo.learners.corl.learner import CoRL

    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        cfg = load_config(config, CoRLConfig, sets)
        plan = plan_cohort(cfg, CoRL.spec(), Machines.listed(hosts, 8))
    finally:
        os.chdir(cwd)
    text = "\n".join(plan.describe())
    return text.replace(sys.executable, "python").replace(f"{ROOT}/", "")


def test_the_documented_layouts_print_the_plan_the_code_makes():
    docs = (ROOT / "docs" / "learners.md").read_text()
    for title, (config, hosts, sets) in LAYOUTS.items():
        command = f"councilzoo train corl {config} --dry-run --hosts '{hosts}' --gpus-per-host 8"
        command += "".join(f" --set {s}" for s in sets)
        lines = layout_plan(config, hosts, sets).splitlines()
        block = f"    $ {command}\n    ...\n" + "".join(f"    {line}\n" for line in lines)
        assert block in docs, f"docs/learners.md's layout {title!r} differs from the plan:\n{block}"
